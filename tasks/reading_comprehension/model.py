"""The reading-comprehension network: a DrQA-style char reader, trained from scratch.

    context ids ─ char emb ─┬──────────────────────────────┐
                            ├─ aligned question emb ───────┤
    context features ───────┼──────────────────────────────┴─ BiGRU x L ─┐
    question ids ─ char emb ┴─ BiGRU ─ self-attentive pooling ─ q ───────┴─ bilinear ─ start / end

DrQA (Chen et al., *Reading Wikipedia to Answer Open-Domain Questions*, ACL
2017) over chars: each context char gets its embedding, the question's
embedding aligned to it by attention, and match features computed in
:mod:`.data` (does the char / char n-gram / word occur in the question, its
place in its word).  A BiGRU reads the context, the question becomes one
vector by self-attentive pooling, and bilinear maps score each position as
the answer's start and end.

Position 0 of every context is a NULL token: a window without the answer is
trained to put its start and end there, so the softmax over one window
(NULL included) is comparable across windows and gives a null score.

``forward(context_ids [B, T], context_features [B, T, F], question_ids [B, Q])``
returns ``(p_start, p_end)``, each [B, T], softmaxed over the real positions
(pads get 0).  The GRUs take the real lengths, so a window's output does not
depend on how much padding its batch adds.

With ``max_span = L > 0`` the network also scores answer *lengths*: a third
output ``length_scores`` [B, L + 1], index 0 for the NULL span and ``k`` for
a span of ``k`` chars, a learned bias plus (``span_by_question``) a linear map
of the question vector, so "哪一年" can ask for 5 chars and "为什么" for 30.
Training then scores every span jointly (``recipes/reading_comprehension/train.py``,
``--span-loss joint``):
``score(s, e) = start[s] + end[e] + length_scores[e - s + 1]`` over all spans
of at most L chars in the window and NULL, one softmax; decoding
(``data.best_spans``) rebuilds exactly that distribution from the three
outputs.  Without ``max_span`` (the 1.0.0 package) the network and its two
outputs are as before.

With ``word_dim > 0`` each char also reads its (multi-char) word's vector from
a *frozen* table started from corpus word vectors (``pretraining/vectors.py``;
row 0, one-char and unknown words, is zero): two more inputs,
``context_word_ids`` [B, T] and ``question_word_ids`` [B, Q], and every char's
token is ``[char emb; word vector]``, for the context, the question and the
aligned question embedding.  Frozen because 9k training questions would pull
the rows of the words they see away from the 300k-word space the others stay
in (DrQA tunes only its 1,000 most frequent question words).
"""

import paddle
import paddle.nn as nn
import paddle.nn.functional as F

_NEG = -1e4


class ReaderNet(nn.Layer):
    def __init__(self, vocab_size: int, num_features: int, char_dim: int = 128, hidden_size: int = 96,
                 num_layers: int = 2, question_layers: int = 1, dropout: float = 0.2, align: bool = True,
                 use_features: bool = True, max_span: int = 0, span_by_question: bool = True,
                 word_vocab_size: int = 0, word_dim: int = 0):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, char_dim, padding_idx=0)
        self.word_dim = word_dim
        if word_dim:
            self.word_embed = nn.Embedding(word_vocab_size, word_dim, padding_idx=0,
                                           weight_attr=paddle.ParamAttr(trainable=False))
        token_dim = char_dim + word_dim
        self.dropout = nn.Dropout(dropout)
        self.align = align
        self.use_features = use_features
        in_dim = token_dim + (token_dim if align else 0) + (num_features if use_features else 0)
        if align:
            self.align_proj = nn.Linear(token_dim, token_dim)
        self.context_rnn = nn.GRU(in_dim, hidden_size, num_layers=num_layers, direction="bidirect",
                                  dropout=dropout if num_layers > 1 else 0.0)
        self.question_rnn = nn.GRU(token_dim, hidden_size, num_layers=question_layers, direction="bidirect",
                                   dropout=dropout if question_layers > 1 else 0.0)
        dim = 2 * hidden_size
        self.question_attn = nn.Linear(dim, 1)
        self.start = nn.Linear(dim, dim)
        self.end = nn.Linear(dim + dim, dim)
        self.max_span = max_span
        if max_span:
            # Zero start: every length equally likely until training (the recipe starts the bias
            # from the training answers' lengths).
            zero = nn.initializer.Constant(0.0)
            self.length_bias = self.create_parameter([max_span + 1], dtype="float32", default_initializer=zero)
            self.length_proj = (nn.Linear(dim, max_span + 1, weight_attr=paddle.ParamAttr(initializer=zero),
                                          bias_attr=False) if span_by_question else None)

    @property
    def input_names(self) -> tuple[str, ...]:
        """The feeds ``forward`` takes, in order (keys of ``data.encode``'s dict)."""
        return ("context_ids", "context_features", "question_ids") + (
            ("context_word_ids", "question_word_ids") if self.word_dim else ())

    def logits(self, context_ids, context_features, question_ids, context_word_ids=None, question_word_ids=None):
        """Start and end scores [B, T] (pads at -1e4) and the length scores [B, max_span + 1]
        (``None`` without ``max_span``), for training."""
        c_mask = (context_ids > 0).astype("float32")                          # [B, T]
        q_mask = (question_ids > 0).astype("float32")                         # [B, Q]
        c_len = (context_ids > 0).astype("int64").sum(axis=1)
        q_len = (question_ids > 0).astype("int64").sum(axis=1)
        c_emb = self.embed(context_ids)
        q_emb = self.embed(question_ids)
        if self.word_dim:
            c_emb = paddle.concat([c_emb, self.word_embed(context_word_ids)], axis=-1)
            q_emb = paddle.concat([q_emb, self.word_embed(question_word_ids)], axis=-1)
        parts = [c_emb]
        if self.align:
            c_key = F.relu(self.align_proj(c_emb))
            q_key = F.relu(self.align_proj(q_emb))
            scores = paddle.matmul(c_key, q_key, transpose_y=True) + (1.0 - q_mask.unsqueeze(1)) * _NEG  # [B, T, Q]
            parts.append(paddle.matmul(F.softmax(scores, axis=-1), q_emb))
        if self.use_features:
            parts.append(context_features)
        x = self.dropout(paddle.concat(parts, axis=-1))
        c_hidden, _ = self.context_rnn(x, sequence_length=c_len)              # [B, T, 2H]
        q_hidden, _ = self.question_rnn(self.dropout(q_emb), sequence_length=q_len)
        q_weights = F.softmax(self.question_attn(q_hidden).squeeze(-1) + (1.0 - q_mask) * _NEG, axis=1)
        q_vec = (q_weights.unsqueeze(-1) * q_hidden).sum(axis=1)             # [B, 2H]
        c_hidden = self.dropout(c_hidden)
        start = (self.start(c_hidden) * q_vec.unsqueeze(1)).sum(axis=-1)
        # The end scorer also sees the start distribution's summary (DrQA's end is independent;
        # this cheap conditioning keeps ends after likely starts).
        p_start = F.softmax(start + (1.0 - c_mask) * _NEG, axis=1)
        start_summary = (p_start.unsqueeze(-1) * c_hidden).sum(axis=1, keepdim=True)    # [B, 1, 2H]
        end_in = paddle.concat([c_hidden, c_hidden * start_summary], axis=-1)
        end = (self.end(end_in) * q_vec.unsqueeze(1)).sum(axis=-1)
        pad = (1.0 - c_mask) * _NEG
        length = None
        if self.max_span:
            # Broadcast to [B, L + 1] (the batch is dynamic in the static export).
            length = self.length_bias.unsqueeze(0) + paddle.zeros_like(q_vec[:, :1])
            if self.length_proj is not None:
                length = length + self.length_proj(q_vec)
        return start * c_mask + pad, end * c_mask + pad, length

    def forward(self, context_ids, context_features, question_ids, context_word_ids=None, question_word_ids=None):
        start, end, length = self.logits(context_ids, context_features, question_ids, context_word_ids,
                                         question_word_ids)
        if length is None:
            return F.softmax(start, axis=1), F.softmax(end, axis=1)
        return F.softmax(start, axis=1), F.softmax(end, axis=1), length
