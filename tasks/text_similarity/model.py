"""Sentence-pair matching networks for taskflow, trained from scratch.

Both take, per side, ``chars`` [B, T] and ``words`` [B, T] int64 ids (0 = pad;
``words`` holds, for each char, the id of the jieba-style word covering it)
and return the probability that the two texts mean the same, [B]
(``logits(...)`` gives the pre-sigmoid score, for training).

* :class:`MatchNet` — an interaction model in the style of RE2 (Yang et al.,
  *Simple and Effective Text Matching with Richer Alignment Features*, ACL
  2019): conv encoders, soft alignment of every char of one text with the
  other, fusion, repeated in blocks with augmented residuals, max pooling.
  Exact-match flags (is this char / word also in the other text?) are
  computed inside the network from the ids and join the embeddings.  With
  ``rnn_size`` a BiGRU's states join them too, before alignment (ESIM's input
  encoding, Chen et al., ACL 2017), so chars are aligned in their context and
  word order reaches the alignment; ``overlap_features`` as for the bi-encoder.
* :class:`SiameseNet` — a bi-encoder: each text alone becomes a vector
  (conv encoder, masked max + mean pooling); the pair is scored from the two
  vectors.  Its vectors serve retrieval (``return_embeddings``).  With
  ``overlap_features`` the scorer also sees how the two texts overlap
  (:func:`overlap_features`): what transfers across domains in the TF-IDF
  baseline (which beats a plain bi-encoder on open-domain LCQMC), and the one
  thing two pooled vectors cannot see, the order of the shared chars
  (北京到上海 / 上海到北京).  With ``rnn_size`` each text is also read in
  order by a BiGRU, whose states are pooled beside the convolutions': a
  width-3 window sees 到 between 北京 and 上海, not which of them comes first
  in the whole question.

Both are symmetric by construction: every layer is shared by the two sides,
alignment uses one score matrix read both ways, and the classifier sees only
order-free combinations of the two pooled vectors (``a + b``, ``|a - b|``,
``a * b``), so ``f(a, b) == f(b, a)``.

Padding invariance: pads are zeroed before every convolution (odd kernels,
symmetric zero padding), masked out of every softmax and pooling, so a pair
scores the same whatever the batch pads it to.  Convolutions are Linear
layers over shifted copies (see :class:`ConvEncoder`).
"""

import paddle
import paddle.nn as nn
import paddle.nn.functional as F

_NEG = -1e4  # fits fp16; exp(-1e4) is exactly 0 in fp32


class Embed(nn.Layer):
    """Char embedding ++ word embedding (++ exact-match flags), pads zeroed."""

    def __init__(self, vocab_size, word_vocab_size, char_dim, word_dim, exact_match):
        super().__init__()
        self.char_emb = nn.Embedding(vocab_size, char_dim)
        self.word_emb = nn.Embedding(word_vocab_size, word_dim) if word_dim > 0 else None
        self.exact_match = exact_match
        self.dim = char_dim + word_dim + (2 if exact_match and word_dim > 0 else 1 if exact_match else 0)

    def forward(self, chars, words, mask, other_chars=None, other_words=None, other_mask=None):
        feats = [self.char_emb(chars)]
        if self.word_emb is not None:
            feats.append(self.word_emb(words))
        if self.exact_match:
            feats.append(_in_other(chars, other_chars, other_mask))
            if self.word_emb is not None:
                feats.append(_in_other(words, other_words, other_mask))
        return paddle.concat(feats, axis=-1) * mask


def _in_other(ids, other, other_mask):
    """[B, T, 1]: 1.0 where the id (not pad/unknown) also occurs in ``other``."""
    same = paddle.equal(ids.unsqueeze(2), other.unsqueeze(1)).astype("float32")       # [B, T, S]
    known = (other > 1).astype("float32").unsqueeze(1) * other_mask.transpose([0, 2, 1])  # [B, 1, S]
    return (same * known).max(axis=2, keepdim=True)


class ConvEncoder(nn.Layer):
    """A stack of same-length convolutions with ReLU; pads are re-zeroed before each.

    Each convolution is a Linear over ``kernel`` shifted copies of the input
    (zeros shifted in at both ends): the same function as a Conv1D with
    symmetric zero padding.  The shifts are products with 0/1 [T, T] matrices,
    whose gradients are matrix products too; on CPU this trains several times
    faster than Paddle's Conv1D (or slicing), and it avoids oneDNN's layout
    issues with Conv1D.
    """

    def __init__(self, in_dim, hidden, layers, kernel, dropout):
        super().__init__()
        if kernel % 2 != 1:
            raise ValueError(f"kernel_size must be odd (same-length, symmetric), got {kernel}")
        self.kernel = kernel
        self.convs = nn.LayerList([nn.Linear(kernel * (in_dim if i == 0 else hidden), hidden) for i in range(layers)])
        self.dropout = SharedDropout(dropout)

    def _windows(self, x, shifts):
        return paddle.concat([x if s is None else paddle.matmul(s, x) for s in shifts], axis=-1)

    def forward(self, x, mask):
        shifts = _shift_matrices(mask, self.kernel // 2)
        for conv in self.convs:
            x = F.relu(conv(self._windows(self.dropout(x * mask), shifts)))
        return x * mask


def _shift_matrices(mask, half):
    """``[S_-half, ..., None, ..., S_half]`` with ``(S_k @ x)[t] = x[t + k]`` (0 outside)."""
    if half == 0:
        return [None]
    pos = paddle.cumsum(paddle.ones_like(mask[0, :, 0]), axis=0)     # 1..T, dynamic T
    rows, cols = pos.unsqueeze(1), pos.unsqueeze(0)
    return [None if k == 0 else paddle.equal(rows + float(k), cols).astype("float32") for k in range(-half, half + 1)]


class SharedDropout(nn.Layer):
    """Dropout with one mask per sequence, shared by all its positions ("locked"
    dropout, Gal & Ghahramani 2016); T times fewer random numbers than
    element-wise dropout, which dominates a CPU training step otherwise."""

    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        keep = (paddle.rand([x.shape[0]] + [1] * (len(x.shape) - 2) + [x.shape[-1]]) >= self.p).astype(x.dtype)
        return x * keep / (1.0 - self.p)


class Dense(nn.Layer):
    def __init__(self, in_dim, out_dim, dropout=0.0):
        super().__init__()
        self.linear = nn.Linear(in_dim, out_dim)
        self.dropout = SharedDropout(dropout)

    def forward(self, x):
        return F.relu(self.linear(self.dropout(x)))


class Block(nn.Layer):
    """Encode, align, fuse (one RE2 block)."""

    def __init__(self, in_dim, hidden, enc_layers, kernel, dropout):
        super().__init__()
        self.encoder = ConvEncoder(in_dim, hidden, enc_layers, kernel, dropout)
        dim = in_dim + hidden
        self.project = Dense(dim, hidden, dropout)
        self.temperature = self.create_parameter([1], default_initializer=nn.initializer.Constant(1.0 / hidden ** 0.5))
        self.fuse_orig = Dense(2 * dim, hidden, dropout)
        self.fuse_diff = Dense(2 * dim, hidden, dropout)
        self.fuse_prod = Dense(2 * dim, hidden, dropout)
        self.fuse = Dense(3 * hidden, hidden, dropout)

    def forward(self, a, a_mask, b, b_mask):
        a = paddle.concat([a, self.encoder(a, a_mask)], axis=-1)
        b = paddle.concat([b, self.encoder(b, b_mask)], axis=-1)
        scores = paddle.matmul(self.project(a), self.project(b), transpose_y=True) * self.temperature  # [B, Ta, Tb]
        a_aligned = paddle.matmul(F.softmax(scores + (1.0 - b_mask.transpose([0, 2, 1])) * _NEG, axis=2), b)
        scores_t = scores.transpose([0, 2, 1])
        b_aligned = paddle.matmul(F.softmax(scores_t + (1.0 - a_mask.transpose([0, 2, 1])) * _NEG, axis=2), a)
        return self._fuse(a, a_aligned) * a_mask, self._fuse(b, b_aligned) * b_mask

    def _fuse(self, x, aligned):
        parts = [
            self.fuse_orig(paddle.concat([x, aligned], axis=-1)),
            self.fuse_diff(paddle.concat([x, x - aligned], axis=-1)),
            self.fuse_prod(paddle.concat([x, x * aligned], axis=-1)),
        ]
        return self.fuse(paddle.concat(parts, axis=-1))


def _masked_max(x, mask):
    # adaptive_max_pool1d: same value as .max(axis=1), its backward is ~15x faster on CPU.
    x = x * mask + (1.0 - mask) * _NEG
    return F.adaptive_max_pool1d(x.transpose([0, 2, 1]), 1).squeeze(-1)


def _masked_mean(x, mask):
    return (x * mask).sum(axis=1) / paddle.clip(mask.sum(axis=1), min=1.0)


class Classifier(nn.Layer):
    """P(same meaning) from two pooled vectors, through order-free features only (and
    ``extra`` symmetric pair features, when given)."""

    def __init__(self, dim, hidden, dropout, extra=0):
        super().__init__()
        self.hidden = Dense(3 * dim + extra, hidden, dropout)
        self.dropout = SharedDropout(dropout)
        self.out = nn.Linear(hidden, 1)

    def forward(self, u, v, extra=None):
        """The logit, [B]; the probability is its sigmoid."""
        feats = [u + v, paddle.abs(u - v), u * v] + ([] if extra is None else [extra])
        z = self.hidden(paddle.concat(feats, axis=-1))
        return self.out(self.dropout(z)).squeeze(-1)


OVERLAP_FEATURES = 9


def _matches(a_ids, b_ids):
    """[B, T, S]: 1.0 where a's id equals b's and is a real one (not pad / unknown); its transpose
    is the same for (b, a)."""
    return paddle.equal(a_ids.unsqueeze(2), b_ids.unsqueeze(1)).astype("float32") \
        * (b_ids > 1).astype("float32").unsqueeze(1)


def _directed_overlap(chars, words, a_mask):
    """Per pair, how ``a`` is found in ``b`` ([B] each), from the char and word matches of a's
    positions with b's (:func:`_matches`): the share of a's chars and of its words that occur in b,
    the number of a's chars that do not (log1p), and among adjacent chars of a both found in b, the
    share whose first matches in b come in the same order."""
    a_len = paddle.clip(a_mask.sum(axis=[1, 2]), min=1.0)
    found = chars.max(axis=2)                                                    # [B, T]
    missing = (a_mask.squeeze(-1) - found).sum(axis=1)
    first = paddle.argmax(chars, axis=2).astype("float32")     # where in b; 0 where nowhere (masked by found)
    both = found[:, 1:] * found[:, :-1]
    ahead = (first[:, 1:] > first[:, :-1]).astype("float32") * both
    in_order = (ahead.sum(axis=1) + 1.0) / (both.sum(axis=1) + 1.0)              # 1.0 with no shared pairs
    return [found.sum(axis=1) / a_len, words.max(axis=2).sum(axis=1) / a_len, paddle.log1p(missing), in_order]


def overlap_features(a_chars, a_words, b_chars, b_words):
    """[B, OVERLAP_FEATURES], the same whichever text comes first: the mean and the minimum of
    each directed figure (:func:`_directed_overlap`) over the two directions, and the relative
    length difference."""
    a_mask, b_mask = _mask(a_chars), _mask(b_chars)
    chars, words = _matches(a_chars, b_chars), _matches(a_words, b_words)      # computed once, read both ways
    ab = _directed_overlap(chars, words, a_mask)
    ba = _directed_overlap(chars.transpose([0, 2, 1]), words.transpose([0, 2, 1]), b_mask)
    feats = []
    for x, y in zip(ab, ba):
        feats += [(x + y) * 0.5, paddle.minimum(x, y)]
    a_len, b_len = a_mask.sum(axis=[1, 2]), b_mask.sum(axis=[1, 2])
    feats.append(paddle.abs(a_len - b_len) / paddle.clip(paddle.maximum(a_len, b_len), min=1.0))
    return paddle.stack(feats, axis=-1)


def _mask(ids):
    return (ids > 0).astype("float32").unsqueeze(-1)  # [B, T, 1]


class MatchNet(nn.Layer):
    """RE2-style interaction model (see the module docstring)."""

    def __init__(self, vocab_size, word_vocab_size, char_dim=128, word_dim=64, hidden_size=128,
                 blocks=2, enc_layers=2, kernel_size=3, dropout=0.2, exact_match=True, rnn_size=0,
                 overlap_features=False):
        super().__init__()
        self.embed = Embed(vocab_size, word_vocab_size, char_dim, word_dim, exact_match)
        self.rnn = nn.GRU(self.embed.dim, rnn_size, direction="bidirect") if rnn_size > 0 else None
        self.dropout = SharedDropout(dropout)
        emb = self.embed.dim + 2 * rnn_size
        self.blocks = nn.LayerList([
            Block(emb if i == 0 else emb + hidden_size, hidden_size, enc_layers, kernel_size, dropout)
            for i in range(blocks)])
        self.overlap = bool(overlap_features)
        self.classifier = Classifier(hidden_size, hidden_size, dropout, OVERLAP_FEATURES if self.overlap else 0)

    def forward(self, a_chars, a_words, b_chars, b_words):
        return F.sigmoid(self.logits(a_chars, a_words, b_chars, b_words))

    def logits(self, a_chars, a_words, b_chars, b_words):
        a_mask, b_mask = _mask(a_chars), _mask(b_chars)
        a_emb = self._read(self.embed(a_chars, a_words, a_mask, b_chars, b_words, b_mask), a_mask)
        b_emb = self._read(self.embed(b_chars, b_words, b_mask, a_chars, a_words, a_mask), b_mask)
        a, b = a_emb, b_emb
        prev_a = prev_b = None
        for i, block in enumerate(self.blocks):
            if i > 0:
                # Augmented residual: the embeddings plus the sum of the last two block outputs.
                res_a = a if prev_a is None else (a + prev_a) * 0.7071067811865476
                res_b = b if prev_b is None else (b + prev_b) * 0.7071067811865476
                prev_a, prev_b = a, b
                a, b = paddle.concat([a_emb, res_a], axis=-1), paddle.concat([b_emb, res_b], axis=-1)
            a, b = block(a, a_mask, b, b_mask)
        extra = overlap_features(a_chars, a_words, b_chars, b_words) if self.overlap else None
        return self.classifier(_masked_max(a, a_mask), _masked_max(b, b_mask), extra)

    def _read(self, x, mask):
        """With ``rnn_size``, each char's embedding ++ the BiGRU's states there (ESIM's input
        encoding): alignment then compares chars in their context, so 张三 before 欠 and 张三 after
        it no longer match perfectly, which the convolutions' three-char window cannot see."""
        if self.rnn is None:
            return x
        states, _ = self.rnn(self.dropout(x), sequence_length=mask.squeeze(-1).sum(axis=1).astype("int64"))
        return paddle.concat([x, states * mask], axis=-1)


class SiameseNet(nn.Layer):
    """Bi-encoder: ``encode`` each text alone, score the pair from the two vectors.

    Returns ``(probability [B], embedding_a [B, D], embedding_b [B, D])``.
    """

    def __init__(self, vocab_size, word_vocab_size, char_dim=128, word_dim=64, hidden_size=256,
                 enc_layers=2, kernel_size=3, dropout=0.2, overlap_features=False, rnn_size=0):
        super().__init__()
        self.embed = Embed(vocab_size, word_vocab_size, char_dim, word_dim, exact_match=False)
        self.encoder = ConvEncoder(self.embed.dim, hidden_size, enc_layers, kernel_size, dropout)
        self.rnn = nn.GRU(self.embed.dim, rnn_size, direction="bidirect") if rnn_size > 0 else None
        self.dropout = SharedDropout(dropout)
        self.pool_dim = self.embed.dim + hidden_size + 2 * rnn_size
        self.project = nn.Linear(2 * self.pool_dim, hidden_size)
        self.overlap = bool(overlap_features)
        self.classifier = Classifier(hidden_size, hidden_size, dropout, OVERLAP_FEATURES if self.overlap else 0)

    def encode(self, chars, words):
        mask = _mask(chars)
        x = self.embed(chars, words, mask)
        parts = [x, self.encoder(x, mask)]
        if self.rnn is not None:
            # Real lengths, so the backward direction starts at the text's last char and pads change nothing.
            states, _ = self.rnn(self.dropout(x), sequence_length=mask.squeeze(-1).sum(axis=1).astype("int64"))
            parts.append(states * mask)
        h = paddle.concat(parts, axis=-1)
        return paddle.tanh(self.project(paddle.concat([_masked_max(h, mask), _masked_mean(h, mask)], axis=-1)))

    def forward(self, a_chars, a_words, b_chars, b_words):
        u, v = self.encode(a_chars, a_words), self.encode(b_chars, b_words)
        return F.sigmoid(self._score(u, v, a_chars, a_words, b_chars, b_words)), u, v

    def logits(self, a_chars, a_words, b_chars, b_words):
        return self._score(self.encode(a_chars, a_words), self.encode(b_chars, b_words),
                           a_chars, a_words, b_chars, b_words)

    def _score(self, u, v, a_chars, a_words, b_chars, b_words):
        extra = overlap_features(a_chars, a_words, b_chars, b_words) if self.overlap else None
        return self.classifier(u, v, extra)


ARCHITECTURES = {"match": MatchNet, "siamese": SiameseNet}


def build(architecture: dict):
    """The network an ``architecture`` manifest field describes (``type`` picks the class)."""
    config = dict(architecture)
    return ARCHITECTURES[config.pop("type", "match")](**config)
