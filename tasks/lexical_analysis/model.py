"""The lexical analysis network: a LAC-style char BiGRU-CRF.

    char ids ─┐
              ├─ embeddings ─ BiGRU ─ BiGRU ─ Linear ─ emissions ─ CRF (Viterbi) ─ tag ids
    bigram ids┘

LAC (Jiao et al. 2018, Baidu's lexical analysis) is char embeddings, two
bidirectional GRU layers and a linear-chain CRF decoded with Viterbi.  We keep
that shape and add one thing: embeddings of the char bigrams to the left and
right of each char, the cheapest well-known gain for Chinese segmentation and
NER trained from scratch (Pei et al. 2014; Chen et al. 2015; Zhang & Yang 2018).
Bigram ids are looked up in the package's vocabulary by the task's numpy
preprocessing, so the graph takes two int64 inputs: ``char_ids`` [B, T] and
``bigram_ids`` [B, T + 1] (``bigram_ids[:, i]`` is the pair ending at char i,
``bigram_ids[:, i + 1]`` the pair starting there; 0 is padding).

The CRF decodes inside the graph with LAC's own ``crf_decoding`` kernel
(see :func:`crf_decoding`), so the exported program maps ids straight to tag
ids, on Paddle 2.6 (``.pdmodel``) and 3.x (``.json``) alike.  The GRUs take the real lengths, so
every real position's output is independent of how much padding a batch adds.
"""

from __future__ import annotations

import numpy as np
import paddle
import paddle.nn as nn

__all__ = ["LexicalNet", "ConvLexicalNet", "crf_decoding", "crf_batch_loss"]


def crf_decoding(emission, transition, lengths):
    """Viterbi path [B, T] of a linear-chain CRF: LAC's ``crf_decoding`` kernel on padded input.

    ``transition`` is [K + 2, K]: start scores, stop scores, then tag-to-tag scores.
    Paddle's public ``paddle.text.viterbi_decode`` gives the same paths but is 10-40x
    slower on CPU (2-10 ms for one 45-char sentence, ~40 ms for 64 of them, against
    0.06 and 3.5 ms), which made it a third of the model's inference time.  The op
    has no public Python API, so it is reached the way Paddle's own layers reach
    their ops: the C++ op in dynamic and PIR (Paddle 3) mode, an appended
    ``crf_decoding`` op in a Paddle 2 static program.
    """
    from paddle import _C_ops, _legacy_C_ops
    from paddle.base.framework import in_dynamic_or_pir_mode

    if in_dynamic_or_pir_mode():
        if hasattr(_C_ops, "crf_decoding"):
            return _C_ops.crf_decoding(emission, transition, None, lengths)
        return _legacy_C_ops.crf_decoding(emission, transition, None, lengths)
    from paddle.base.layer_helper import LayerHelper

    helper = LayerHelper("crf_decoding")
    path = helper.create_variable_for_type_inference("int64")
    helper.append_op(type="crf_decoding", inputs={"Emission": [emission], "Transition": [transition], "Length": [lengths]},
                     outputs={"ViterbiPath": [path]})
    return path


class LexicalNet(nn.Layer):
    def __init__(self, vocab_size: int, bigram_vocab_size: int, num_tags: int, char_dim: int = 128,
                 bigram_dim: int = 64, hidden_size: int = 128, num_layers: int = 2, dropout: float = 0.0):
        super().__init__()
        self.num_tags = num_tags
        self.char_emb = nn.Embedding(vocab_size, char_dim, padding_idx=0)
        self.bigram_emb = nn.Embedding(bigram_vocab_size, bigram_dim, padding_idx=0) if bigram_dim > 0 else None
        in_dim = char_dim + 2 * bigram_dim if bigram_dim > 0 else char_dim
        self.dropout = nn.Dropout(dropout)
        self.emission = nn.Linear(self._build_context(in_dim, hidden_size, num_layers, dropout), num_tags)
        uniform = nn.initializer.Uniform(-0.1, 0.1)
        self.transitions = self.create_parameter([num_tags, num_tags], default_initializer=uniform)
        self.start = self.create_parameter([num_tags], default_initializer=uniform)
        self.stop = self.create_parameter([num_tags], default_initializer=uniform)

    # ------------------------------------------------------------ features
    def _build_context(self, in_dim: int, hidden_size: int, num_layers: int, dropout: float) -> int:
        """Create the layers that give each char its context; returns their output width."""
        self.gru = nn.GRU(in_dim, hidden_size, num_layers=num_layers, direction="bidirect", dropout=dropout)
        return 2 * hidden_size

    def _context(self, feats, mask, lengths):
        hidden, _ = self.gru(feats, sequence_length=lengths)
        return hidden

    def emissions(self, char_ids, bigram_ids):
        """Per-char tag scores [B, T, K] (without start/stop) and lengths [B]."""
        mask = (char_ids > 0).astype("int64")
        lengths = mask.sum(axis=1)
        feats = self.char_emb(char_ids)
        if self.bigram_emb is not None:
            bigrams = self.bigram_emb(bigram_ids)                           # [B, T + 1, D]
            feats = paddle.concat([feats, bigrams[:, :-1], bigrams[:, 1:]], axis=-1)
        hidden = self._context(self.dropout(feats), mask, lengths)
        return self.emission(self.dropout(hidden)), lengths

    def _with_ends(self, emission, char_ids):
        """Emissions with the start score on the first char and the stop score on each last real char."""
        # Positions from cumsum, not slices: oneDNN kernels reject the empty slice x[:, 1:] of a
        # one-char batch (Paddle 2.6: "could not reshape a memory descriptor"; 3.3: std::exception).
        mask = (char_ids > 0).astype("int64")
        position = paddle.cumsum(mask, axis=1) * mask                       # 1..length, 0 on padding
        first = (position == 1).astype(emission.dtype).unsqueeze(-1)
        last = (position == mask.sum(axis=1, keepdim=True)).astype(emission.dtype) * mask.astype(emission.dtype)
        return emission + first * self.start + last.unsqueeze(-1) * self.stop

    # ---------------------------------------------------------- inference
    def forward(self, char_ids, bigram_ids):
        """Best tag ids [B, T] (positions past a row's length are 0)."""
        emission, lengths = self.emissions(char_ids, bigram_ids)
        # crf_decoding's transition: row 0 start scores, row 1 stop scores, then [K, K].
        transition = paddle.concat([self.start.unsqueeze(0), self.stop.unsqueeze(0), self.transitions], axis=0)
        return crf_decoding(emission, transition, lengths)

    # ----------------------------------------------------------- training
    def crf_loss(self, emission, char_ids, tags):
        """Mean negative log-likelihood of the gold ``tags`` [B, T] under the linear-chain CRF."""
        mask = (char_ids > 0).astype(emission.dtype)                        # [B, T]
        emission = self._with_ends(emission, char_ids)
        k = self.num_tags
        # Score of the gold path.
        gold_emit = paddle.take_along_axis(emission, tags.unsqueeze(-1), axis=2).squeeze(-1)
        pair = tags[:, :-1] * k + tags[:, 1:]
        gold_trans = paddle.gather(self.transitions.reshape([-1]), pair.reshape([-1])).reshape(pair.shape)
        gold = (gold_emit * mask).sum(axis=1) + (gold_trans * mask[:, 1:]).sum(axis=1)
        # Log partition function by the forward algorithm, in exp space with a matmul per
        # step (logsumexp over a [B, K, K] tensor is ~5x slower on CPU): with row maxima m,
        # logsumexp_i(alpha_i + T_ij) = m + Tmax + log(exp(alpha - m) @ exp(T - Tmax))_j.
        # Rows past their end keep their alpha.
        t_max = self.transitions.max()
        exp_trans = paddle.exp(self.transitions - t_max)
        alpha = emission[:, 0]
        for t in range(1, emission.shape[1]):
            m = alpha.max(axis=1, keepdim=True)
            step = paddle.log(paddle.matmul(paddle.exp(alpha - m), exp_trans)) + m + t_max + emission[:, t]
            keep = mask[:, t].unsqueeze(-1)
            alpha = step * keep + alpha * (1 - keep)
        log_z = paddle.logsumexp(alpha, axis=1)
        return (log_z - gold).mean()


class ConvLexicalNet(LexicalNet):
    """The same tagger with dilated convolutions in place of the BiGRU stack (ID-CNN-CRF).

    Strubell et al. (2017, "Fast and Accurate Entity Recognition with Iterated Dilated
    Convolutions") replace the recurrent layers of a BiLSTM-CRF with blocks of width-3
    convolutions whose dilations grow (1, 1, 2): every char is computed at once instead of
    one time step after another, which is what makes the GRU stack most of the fast
    model's CPU time (benchmarks/RESULTS.md, lexical_analysis).  ``num_layers`` blocks of
    ``dilations`` give each char a window of ``1 + 2 * num_layers * sum(dilations)`` chars
    (33 for 4 blocks of 1, 1, 2); every layer is residual and its output is zeroed on
    padding, so a real position's output does not depend on how much padding its batch
    adds (zero padding at the text's ends, as if it were alone).
    """

    DILATIONS = (1, 1, 2)   # one block: Strubell et al.'s NER setting

    def __init__(self, *args, dilations: tuple[int, ...] = DILATIONS, **kwargs):
        self._dilations = tuple(dilations)
        super().__init__(*args, **kwargs)

    def _build_context(self, in_dim: int, hidden_size: int, num_layers: int, dropout: float) -> int:
        # Channels first (NCL): Paddle's oneDNN conv kernels reject the NLC layout at inference.
        self.project = nn.Conv1D(in_dim, hidden_size, 3, padding=1)
        self.convs = nn.LayerList([
            nn.Conv1D(hidden_size, hidden_size, 3, padding=d, dilation=d)
            for _ in range(num_layers) for d in self._dilations])
        self.block_dropout = nn.Dropout(dropout)
        return hidden_size

    def _context(self, feats, mask, lengths):
        keep = mask.astype(feats.dtype).unsqueeze(1)                        # [B, 1, T]
        hidden = nn.functional.relu(self.project(feats.transpose([0, 2, 1]) * keep)) * keep
        for k, conv in enumerate(self.convs):
            hidden = hidden + nn.functional.relu(conv(hidden)) * keep
            if (k + 1) % len(self._dilations) == 0:
                hidden = self.block_dropout(hidden)
        return hidden.transpose([0, 2, 1])                                  # [B, T, C]


def crf_batch_loss(network: LexicalNet, examples: list[tuple[str, list[int]]], vocab):
    """The CRF loss of ``network`` on ``(normalised text, label ids)`` examples, padded into one batch;
    ``vocab`` is the :class:`~.tagger.LexicalVocab` that encodes the texts.  Training on the user's
    files (``taskflow train ner``) and the lab's recipe for the shipped model both step on it."""
    feeds = vocab.encode([text for text, _ in examples])
    tags = np.zeros_like(feeds["char_ids"])
    for row, (text, labels) in enumerate(examples):
        tags[row, : len(text)] = labels
    char_ids = paddle.to_tensor(feeds["char_ids"])
    emission, _ = network.emissions(char_ids, paddle.to_tensor(feeds["bigram_ids"]))
    return network.crf_loss(emission, char_ids, paddle.to_tensor(tags))
