"""The encoder in PyTorch, and the two pretraining objectives.

``Encoder`` is the network that ships: ``taskflow/encoder/network.py`` is its Paddle twin, with the
same parameter names (``convert.py`` only transposes ``Linear`` weights).  Pre-LN blocks, because a
budgeted run wants a high peak learning rate and little warm-up, which post-LN (BERT's) does not
survive without tuning; the one final norm gives the heads a normalised input.

Objectives (``PretrainConfig.objective``):

* ``mlm``: masked-language modelling, BERT's 80/10/10 replacement, output embedding tied to the
  input one.
* ``electra``: replaced-token detection (Clark et al., 2020).  A small generator (the same depth,
  ``generator_fraction`` of the width) fills the masked positions by sampling from its MLM head;
  the encoder (the discriminator, the one that ships) says for every real position whether its
  token was replaced.  Loss = generator MLM + ``discriminator_weight`` * detection.  The generator
  keeps its own embeddings (ELECTRA shares them; a lever to try once it runs at scale).

Which positions are masked (single chars, or whole words from a segmenter) is the data's choice:
see ``pretrain.py``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD = 0
_MASKED = -1e4   # the Paddle network's additive mask; see taskflow/encoder/network.py


@dataclass(frozen=True)
class EncoderConfig:
    vocab_size: int
    hidden_size: int = 384
    num_layers: int = 6
    num_heads: int = 6
    ffn_size: int = 1536
    max_len: int = 512
    layer_norm_eps: float = 1e-5
    dropout: float = 0.1

    def architecture(self) -> dict:
        """The manifest's ``architecture`` fields: what the Paddle network is built from (no dropout:
        it only ever runs in eval mode there)."""
        fields = asdict(self)
        fields.pop("dropout")
        return fields


class EncoderLayer(nn.Module):
    def __init__(self, config: EncoderConfig):
        super().__init__()
        hidden = config.hidden_size
        self.num_heads = config.num_heads
        self.head_size = hidden // config.num_heads
        self.dropout = config.dropout
        self.attention_norm = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.attention_out = nn.Linear(hidden, hidden)
        self.ffn_norm = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
        self.ffn_in = nn.Linear(hidden, config.ffn_size)
        self.ffn_out = nn.Linear(config.ffn_size, hidden)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, self.head_size).transpose(1, 2)

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor | None) -> torch.Tensor:
        batch, length, hidden = x.shape
        q, k, v = self.qkv(self.attention_norm(x)).chunk(3, dim=-1)
        # With no padding (packed pretraining batches) mask_bias is None, which lets PyTorch pick
        # its flash kernel on the GPU.
        context = F.scaled_dot_product_attention(self._heads(q), self._heads(k), self._heads(v), attn_mask=mask_bias,
                                                 dropout_p=self.dropout if self.training else 0.0)
        x = x + F.dropout(self.attention_out(context.transpose(1, 2).reshape(batch, length, hidden)),
                          self.dropout, self.training)
        return x + F.dropout(self.ffn_out(F.gelu(self.ffn_in(self.ffn_norm(x)))), self.dropout, self.training)


class Encoder(nn.Module):
    """``forward(input_ids [B, T]) -> hidden [B, T, H]``; id 0 (``[PAD]``) is masked out of attention."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        if config.hidden_size % config.num_heads:
            raise ValueError(f"hidden_size {config.hidden_size} is not a multiple of num_heads {config.num_heads}")
        self.config = config
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_len, config.hidden_size)
        self.layers = nn.ModuleList([EncoderLayer(config) for _ in range(config.num_layers)])
        self.final_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.apply(_init_weights)

    def forward(self, input_ids: torch.Tensor, *, padded: bool = True) -> torch.Tensor:
        """``padded=False`` promises there is no ``[PAD]`` in the batch, so attention runs unmasked
        (and so fastest); the result is the same."""
        length = input_ids.shape[1]
        if length > self.config.max_len:
            raise ValueError(f"sequence of {length} positions; this encoder has {self.config.max_len}")
        positions = torch.arange(length, device=input_ids.device)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)[None]
        x = F.dropout(x, self.config.dropout, self.training)
        mask_bias = None
        if padded:
            mask_bias = ((input_ids == PAD).to(x.dtype) * _MASKED)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, mask_bias)
        return self.final_norm(x)


class SpanExtractor(Encoder):
    """The encoder with a start/end head, for extractive reading comprehension: the twin of the
    Paddle ``TransformerSpanExtractor``.  ``forward(input_ids) -> (start_logits, end_logits)``, [B, T]
    each, padding at -1e4.  A subclass, so the encoder's weights keep their names: a pretrained
    encoder's state dict loads into it with only ``span.*`` left to learn."""

    def __init__(self, config: EncoderConfig):
        super().__init__(config)
        self.span = nn.Linear(config.hidden_size, 2)
        _init_weights(self.span)

    def encode(self, input_ids: torch.Tensor) -> torch.Tensor:
        return super().forward(input_ids)

    def forward(self, input_ids: torch.Tensor):
        logits = self.span(self.encode(input_ids))
        padding = (input_ids == PAD).to(logits.dtype) * _MASKED
        start, end = logits.unbind(-1)
        return start + padding, end + padding


def _init_weights(module: nn.Module) -> None:
    # BERT's: N(0, 0.02) for matrices and embeddings, zero biases, unit norms.
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class MaskedLMHead(nn.Module):
    """hidden -> vocabulary logits, through a transform and the (tied) input embedding."""

    def __init__(self, config: EncoderConfig, embeddings: nn.Embedding):
        super().__init__()
        self.transform = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.embeddings = embeddings
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        _init_weights(self.transform)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(F.gelu(self.transform(hidden))), self.embeddings.weight, self.bias)


@dataclass(frozen=True)
class PretrainConfig:
    encoder: EncoderConfig
    objective: str = "mlm"               # "mlm" or "electra"
    generator_fraction: float = 0.25     # ELECTRA generator width / encoder width
    discriminator_weight: float = 50.0   # ELECTRA's lambda

    def __post_init__(self):
        if self.objective not in ("mlm", "electra"):
            raise ValueError(f"objective must be 'mlm' or 'electra', got {self.objective!r}")

    def generator(self) -> EncoderConfig:
        base = self.encoder
        heads = max(1, round(base.num_heads * self.generator_fraction))
        head_size = base.hidden_size // base.num_heads
        return replace(base, hidden_size=heads * head_size, num_heads=heads,
                       ffn_size=max(1, round(base.ffn_size * self.generator_fraction)))


class Pretrainer(nn.Module):
    """The encoder and its pretraining heads; ``forward`` returns the loss and its parts.

    ``forward(input_ids, labels, *, padded)``: ``input_ids`` are the masked inputs, ``labels`` the
    original ids at masked positions and -100 elsewhere.
    """

    def __init__(self, config: PretrainConfig):
        super().__init__()
        self.config = config
        if config.objective == "mlm":
            self.encoder = Encoder(config.encoder)
            self.mlm = MaskedLMHead(config.encoder, self.encoder.word_embeddings)
        else:
            self.generator = Encoder(config.generator())
            self.mlm = MaskedLMHead(config.generator(), self.generator.word_embeddings)
            self.encoder = Encoder(config.encoder)
            self.detector = nn.Linear(config.encoder.hidden_size, 1)
            _init_weights(self.detector)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor, *, padded: bool = True) -> dict:
        masked = labels != -100
        if self.config.objective == "mlm":
            hidden = self.encoder(input_ids, padded=padded)
            logits = self.mlm(hidden[masked]).float()   # only masked positions: 15% of the vocabulary matmul
            loss = F.cross_entropy(logits, labels[masked])
            accuracy = (logits.argmax(-1) == labels[masked]).float().mean()
            return {"loss": loss, "mlm_loss": loss.detach(), "mlm_accuracy": accuracy.detach()}

        logits = self.mlm(self.generator(input_ids, padded=padded)[masked]).float()
        mlm_loss = F.cross_entropy(logits, labels[masked])
        with torch.no_grad():
            sampled = torch.multinomial(F.softmax(logits, dim=-1), 1).squeeze(-1)
        corrupted = input_ids.clone()
        corrupted[masked] = sampled
        # A sampled token that happens to be the original counts as original (as in ELECTRA).
        replaced = (corrupted != torch.where(masked, labels, input_ids)).float()
        scores = self.detector(self.encoder(corrupted, padded=padded)).squeeze(-1).float()
        real = input_ids != PAD
        detection_loss = F.binary_cross_entropy_with_logits(scores[real], replaced[real])
        loss = mlm_loss + self.config.discriminator_weight * detection_loss
        detection_accuracy = ((scores[real] > 0).float() == replaced[real]).float().mean()
        return {"loss": loss, "mlm_loss": mlm_loss.detach(), "detection_loss": detection_loss.detach(),
                "detection_accuracy": detection_accuracy.detach()}
