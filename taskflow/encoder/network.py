"""The encoder in Paddle: the forward pass of ``pretraining/model.py``'s PyTorch ``Encoder``, weight
for weight, so a converted checkpoint gives the same outputs (``tests/test_encoder.py`` checks it on
``tests/fixtures/encoder_parity.npz`` to 1e-4).

    input_ids ─ word emb + position emb ─ [ x + attn(LN(x)) ; x + ffn(LN(x)) ] x L ─ LN ─ hidden [B, T, H]

Pre-LN blocks (the norm inside each residual branch, one final norm): they train at the high
learning rates a short, budgeted pretraining run wants, without the careful warm-up post-LN needs
(Xiong et al., *On Layer Normalization in the Transformer Architecture*, 2020).

Positions holding ``PAD`` (id 0) are masked out of attention, so a text's outputs do not depend
on how much padding its batch adds.  Only ops that Paddle 2.6 and 3.x both export are used, and
shapes are read with ``paddle.shape`` so the static program takes any batch size and length.

Names of parameters are those of the PyTorch module; a ``Linear``'s weight is stored transposed
(Paddle keeps ``[in, out]``), which ``pretraining/convert.py`` does.
"""

from __future__ import annotations

import paddle
import paddle.nn as nn
import paddle.nn.functional as F

__all__ = ["TransformerEncoder", "TransformerSpanExtractor", "TransformerClassifier"]

# Added to the attention scores of padded keys: exp(-1e4) is 0 in float32 and float16 alike,
# and unlike -inf it cannot make a NaN.
_MASKED = -1e4


class EncoderLayer(nn.Layer):
    def __init__(self, hidden_size: int, num_heads: int, ffn_size: int, layer_norm_eps: float):
        super().__init__()
        self.num_heads = num_heads
        self.head_size = hidden_size // num_heads
        self.attention_norm = nn.LayerNorm(hidden_size, epsilon=layer_norm_eps)
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size)
        self.attention_out = nn.Linear(hidden_size, hidden_size)
        self.ffn_norm = nn.LayerNorm(hidden_size, epsilon=layer_norm_eps)
        self.ffn_in = nn.Linear(hidden_size, ffn_size)
        self.ffn_out = nn.Linear(ffn_size, hidden_size)

    def _heads(self, x):
        # [B, T, H] -> [B, heads, T, head_size]; 0 keeps a dimension as it is, whatever its size.
        return x.reshape([0, 0, self.num_heads, self.head_size]).transpose([0, 2, 1, 3])

    def forward(self, x, mask_bias):
        q, k, v = paddle.split(self.qkv(self.attention_norm(x)), 3, axis=-1)
        scores = paddle.matmul(self._heads(q), self._heads(k), transpose_y=True) * (self.head_size ** -0.5)
        weights = F.softmax(scores + mask_bias, axis=-1)
        context = paddle.matmul(weights, self._heads(v)).transpose([0, 2, 1, 3])
        x = x + self.attention_out(context.reshape([0, 0, self.num_heads * self.head_size]))
        return x + self.ffn_out(F.gelu(self.ffn_in(self.ffn_norm(x))))


class TransformerEncoder(nn.Layer):
    """``forward(input_ids [B, T] int64) -> hidden [B, T, hidden_size]``; id 0 is padding.

    The arguments are a package manifest's ``architecture`` fields (``type: transformer_encoder``).
    """

    def __init__(self, vocab_size: int, hidden_size: int = 384, num_layers: int = 6, num_heads: int = 6,
                 ffn_size: int = 1536, max_len: int = 512, layer_norm_eps: float = 1e-5):
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not a multiple of num_heads {num_heads}")
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size)
        self.position_embeddings = nn.Embedding(max_len, hidden_size)
        self.layers = nn.LayerList([EncoderLayer(hidden_size, num_heads, ffn_size, layer_norm_eps)
                                    for _ in range(num_layers)])
        self.final_norm = nn.LayerNorm(hidden_size, epsilon=layer_norm_eps)

    def encode(self, input_ids):
        positions = paddle.arange(paddle.shape(input_ids)[1], dtype="int64").unsqueeze(0)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
        # [B, 1, 1, T]: the same bias for every head and every query.
        mask_bias = (input_ids == 0).astype(x.dtype).unsqueeze([1, 2]) * _MASKED
        for layer in self.layers:
            x = layer(x, mask_bias)
        return self.final_norm(x)

    def forward(self, input_ids):
        return self.encode(input_ids)


class TransformerSpanExtractor(TransformerEncoder):
    """The encoder with a span head for extractive reading comprehension (``type: transformer_span``).

    ``forward(input_ids [B, T]) -> (start_logits, end_logits)``, each [B, T], padding at -1e4.
    Which positions may hold an answer (the context's, not the question's) is the task's to say.
    """

    def __init__(self, vocab_size: int, **encoder):
        super().__init__(vocab_size, **encoder)
        self.span = nn.Linear(self.final_norm.weight.shape[0], 2)

    def forward(self, input_ids):
        logits = self.span(self.encode(input_ids))
        padding = (input_ids == 0).astype(logits.dtype) * _MASKED
        start, end = paddle.unbind(logits, axis=-1)
        return start + padding, end + padding


class TransformerClassifier(TransformerEncoder):
    """The encoder with a linear head on the final ``[CLS]`` state (``type: transformer_classifier``):
    ``pretraining/finetune_classifier.py``'s ``Classifier``, for one text (``[CLS] text [SEP]``) or a
    pair read together (``[CLS] text1 [SEP] text2 [SEP]``).

    ``forward(input_ids [B, T]) -> probabilities [B, num_labels]``: the softmax is in the graph, so
    the task reads probabilities as it does from every other classifier.
    """

    def __init__(self, vocab_size: int, num_labels: int = 2, **encoder):
        super().__init__(vocab_size, **encoder)
        self.head = nn.Linear(self.final_norm.weight.shape[0], num_labels)

    def forward(self, input_ids):
        return F.softmax(self.head(self.encode(input_ids)[:, 0]), axis=-1)
