"""Text classifier for taskflow (text_classification, and sentiment_analysis over it): char CNN +
hashed char n-gram bag, trained from scratch.  Its architecture type is ``sentiment_cnn``, the name
the shipped sentiment package's manifest gives it.

Why this architecture: without a pretrained encoder the strongest cheap signals for Chinese review
sentiment are (a) short char n-grams ("不错", "不太好", "差评") and (b) their local composition with
negation/degree words. A fastText-style bag of char uni+bi-gram embeddings (tri-grams optional)
captures (a) and is robust on short texts; a multi-width CNN (widths 1,3,..,max_kernel) with masked
max pooling captures (b) and long reviews. Both only need char ids: n-gram ids are hashed inside the
network from adjacent char ids, so the product keeps a single int64 input and a plain char vocabulary.
Bigram id of chars (a, b), both non-pad: (a * 1000003 + b) % (bigram_buckets - 1) + 1, else 0.

Wide & deep: with ``wide_buckets > 0`` a linear model over hashed char 1/2/3-grams (the "wide"
part: logistic regression on n-gram counts, scaled by 1/sqrt(#n-grams)) is trained on its own and
its probabilities are mixed with the CNN's, ``deep_weight * deep + (1 - deep_weight) * wide``, the
weight chosen on dev. The two err differently (memorised phrases vs composition), so the mix beats
each; on ChnSentiCorp dev it beat a TF-IDF + logistic regression baseline that the CNN alone did not.
With ``short_length > 0`` a text of at most that many chars is mixed with ``short_deep_weight``
instead, and with ``short_wide`` its n-gram part is one of its own (``wide_short_*``, reading the
negation scope; ``wide_negation=False`` keeps the long texts' n-gram part out of it): on a few words
an n-gram model taught word polarity from lexicons (the sentiment recipe) knows more than
convolutions trained on long reviews, and a long review keeps the mix it was chosen for.

With ``rnn_size > 0`` the deep part also reads the char + bigram features in order with a BiGRU
(masked max pool of its states beside the CNN's): a window of 5 chars sees 不 next to 难吃, but
whether 一点也不 scopes over the adjective after it, or the clause after 但是 decides, is order.

With ``negator_ids`` (the char ids of 不, 没, 无...), the chars within ``negation_window`` after a
negator, up to a clause break (``clause_break_ids``), are read as negated: the classic NOT_ marking of
sentiment analysis (Das & Chen 2001; Pang et al. 2002), done inside the network from the char ids.
A negator inside one of ``negation_exception_ids`` (不过, 不仅, 没想到, 无比 ...: words that hold a
negator's char and negate nothing) is not one.
A wide n-gram in that scope weighs as its own weights with the labels swapped, plus a correction of
its own (``wide_negated``, starting at zero): 难吃 is a complaint, so 不难吃 starts as praise without
a single negated example of it, and 不过 / 不仅 learn their exceptions.  The deep part adds a learnt
vector to the char embeddings in scope.

With ``polarity_head`` (needs negators) the deep part also scores the text as a sum of word
polarities, where negation is an operation rather than a pattern to memorise (Socher et al. 2013
learnt such flips from a treebank; here the flip is the model's structure).  Each position has a
polarity from its char and the bigram starting there alone (``lexicon``: what 宽敞 says wherever it
stands, taught by every review that uses it); a negator's flip strength comes from its context
(``flip_gate`` over the convolutions there: the 不 of 不宽敞 flips, those of 不过 / 不得不 need not);
each position in a negator's scope has its polarity multiplied by 1 - 2 x that strength; positions
are weighed by attention over the convolutions, plus a learnt bonus after a contrast connective
(``contrast_ids``: 但 / 却 / 可是 / 不过; the clause after it decides).  The weighted sum is one more
input to the output layer.  An unseen negated word then takes the opposite of the polarity its plain
uses taught, which the n-gram and convolution parts cannot give it.

Input: int64 [batch, seq_len] char ids, 0 = pad (right padding), 1 = unknown.
Output: float32 softmax probabilities [batch, num_labels], in the order of the manifest's labels.
"""
import paddle
import paddle.nn as nn
import paddle.nn.functional as F


def hash_ngrams(ids, mask, n, buckets):
    """int64 [B, L]: the bucket (1 .. buckets - 1) of the n chars starting at each position, 0 where
    they run into padding.  A rolling hash of the char ids (int64: vocab * prime^2 stays far from
    overflow); id 0 is reserved for "no n-gram here" so invalid windows contribute nothing."""
    h = ids
    valid = mask
    for i in range(1, n):
        nxt = paddle.concat([ids[:, i:], paddle.zeros_like(ids[:, :i])], axis=1)
        # Multiply by a tensor, not a Python int: a Python scalar becomes a float `scale` op that
        # oneDNN evaluates inexactly on large int64 values (ids then differ from training).
        h = h * paddle.full_like(h, 1000003) + nxt
        valid = valid * (nxt > 0).astype('int64')
    h = paddle.remainder(h, paddle.full_like(h, buckets - 1)) + 1
    return h * valid


class NgramLinear(nn.Layer):
    """Logistic regression over hashed char 1..``max_n``-grams: SentimentNet's wide part alone, for
    a decision that needs no composition and must cost next to nothing (sentiment's genre router:
    is this a review or a post?).  The n-gram weights are summed and scaled by 1/sqrt(#n-grams), so a
    long text is not surer for its length alone.  Its architecture type is ``ngram_linear``."""

    def __init__(self, vocab_size, buckets=262144, num_labels=2, max_n=2):
        super().__init__()
        self.buckets, self.max_n = buckets, max_n
        self.uni = nn.Embedding(vocab_size, num_labels)
        self.grams = nn.LayerList([nn.Embedding(buckets, num_labels) for _ in range(2, max_n + 1)])
        self.bias = self.create_parameter([num_labels], is_bias=True)

    def logits(self, input_ids):
        mask_i = (input_ids > 0).astype('int64')
        total, count = 0.0, 0.0
        for n in range(1, self.max_n + 1):
            ids = input_ids * mask_i if n == 1 else hash_ngrams(input_ids, mask_i, n, self.buckets)
            table = self.uni if n == 1 else self.grams[n - 2]
            valid = (ids > 0).astype('float32').unsqueeze(-1)
            total = total + (table(ids) * valid).sum(axis=1)
            count = count + valid.sum(axis=1)
        return total / paddle.sqrt(paddle.clip(count, min=1.0)) + self.bias

    def forward(self, input_ids):
        return F.softmax(self.logits(input_ids), axis=-1)


class SentimentNet(nn.Layer):
    def __init__(self, vocab_size, embed_dim=128, bigram_buckets=50000, trigram_buckets=0,
                 ngram_dim=64, conv_channels=192, max_kernel=5, hidden_size=0,
                 num_labels=2, dropout=0.3, wide_buckets=0, deep_weight=1.0, rnn_size=0,
                 negator_ids=(), clause_break_ids=(), negation_window=4, polarity_head=False,
                 contrast_ids=(), negation_exception_ids=(), short_length=0, short_deep_weight=1.0,
                 short_wide=False, wide_negation=True):
        super().__init__()
        if polarity_head and not negator_ids:
            raise ValueError("polarity_head needs negator_ids")
        self.wide_buckets = wide_buckets
        self.deep_weight = deep_weight
        self.short_length, self.short_deep_weight = int(short_length), float(short_deep_weight)
        if short_wide and (wide_buckets <= 0 or self.short_length <= 0):
            raise ValueError("short_wide needs wide_buckets and short_length")
        self.short_wide = bool(short_wide)
        self.negator_ids, self.clause_break_ids = list(negator_ids), list(clause_break_ids)
        self.negation_window = negation_window
        self.negation_exception_ids = [list(ids) for ids in negation_exception_ids]
        if wide_buckets > 0:
            self.wide_uni = nn.Embedding(vocab_size, num_labels)
            self.wide_bi = nn.Embedding(wide_buckets, num_labels)
            self.wide_tri = nn.Embedding(wide_buckets, num_labels)
            self.wide_bias = self.create_parameter([num_labels], is_bias=True)
            if self.negator_ids and wide_negation:
                # A correction to the swapped weights: zero until the data says otherwise.
                self.wide_negated = nn.Embedding(wide_buckets, num_labels, weight_attr=paddle.ParamAttr(
                    initializer=nn.initializer.Constant(0.0)))
            if self.short_wide:
                self.wide_short_uni = nn.Embedding(vocab_size, num_labels)
                self.wide_short_bi = nn.Embedding(wide_buckets, num_labels)
                self.wide_short_tri = nn.Embedding(wide_buckets, num_labels)
                self.wide_short_bias = self.create_parameter([num_labels], is_bias=True)
                if self.negator_ids:
                    self.wide_short_negated = nn.Embedding(wide_buckets, num_labels, weight_attr=paddle.ParamAttr(
                        initializer=nn.initializer.Constant(0.0)))
        if self.negator_ids:
            self.negated_vec = self.create_parameter(
                [embed_dim], default_initializer=nn.initializer.Normal(std=0.02))
        self.bigram_buckets = bigram_buckets
        self.trigram_buckets = trigram_buckets
        self.char_emb = nn.Embedding(vocab_size, embed_dim)
        in_dim = embed_dim
        if bigram_buckets > 0:
            self.bigram_emb = nn.Embedding(bigram_buckets, ngram_dim)
            in_dim += ngram_dim
        if trigram_buckets > 0:
            self.trigram_emb = nn.Embedding(trigram_buckets, ngram_dim)
            in_dim += ngram_dim
        # Odd widths with symmetric zero padding: together with zeroed pad embeddings the value at
        # every real position is independent of how much right padding the batch adds.
        self.kernels = list(range(1, max_kernel + 1, 2))
        self.convs = nn.LayerList([
            nn.Conv1D(in_dim, conv_channels, k, padding=k // 2)
            for k in self.kernels])
        feat_dim = in_dim + conv_channels * len(self.kernels)
        self.rnn = nn.GRU(in_dim, rnn_size, direction="bidirect") if rnn_size > 0 else None
        if rnn_size > 0:
            feat_dim += 2 * rnn_size
        self.polarity_head = bool(polarity_head)
        self.contrast_ids = [list(ids) for ids in contrast_ids]
        if self.polarity_head:
            conv_dim = conv_channels * len(self.kernels)
            self.lexicon = nn.Linear(in_dim, 1)
            self.attend = nn.Linear(conv_dim, 1)
            # Flip by default (sigmoid(2) = 0.88): a negator negates unless its context says not.
            self.flip_gate = nn.Linear(conv_dim, 1, bias_attr=paddle.ParamAttr(
                initializer=nn.initializer.Constant(2.0)))
            self.contrast_bonus = self.create_parameter([1], default_initializer=nn.initializer.Constant(0.0))
            feat_dim += 1
        self.hidden = nn.Linear(feat_dim, hidden_size) if hidden_size > 0 else None
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden_size if hidden_size > 0 else feat_dim, num_labels)

    @staticmethod
    def _shifted(x, k):
        """x moved k places right along axis 1, zeros in front."""
        return paddle.concat([paddle.zeros_like(x[:, :k]), x[:, :-k]], axis=1)

    @staticmethod
    def _any_of(input_ids, ids):
        hit = paddle.zeros_like(input_ids)
        for i in ids:
            hit = hit + (input_ids == paddle.full_like(input_ids, i)).astype('int64')
        return hit

    def _scope(self, input_ids, strength):
        """Spread ``strength`` (given at negators, [B, L], int64 or float32) over the
        ``negation_window`` chars after each, stopping at a clause break: the sum at each position."""
        open_ = (1 - self._any_of(input_ids, self.clause_break_ids)).astype(strength.dtype)
        scope, unbroken = paddle.zeros_like(strength), open_
        for k in range(1, self.negation_window + 1):
            scope = scope + self._shifted(strength, k) * unbroken
            unbroken = unbroken * self._shifted(open_, k)
        return scope

    def negators(self, input_ids):
        """int64 [B, L]: 1 at a negator char that is not inside a negation exception word."""
        negator = self._any_of(input_ids, self.negator_ids)
        if not self.negation_exception_ids:
            return negator
        covered = paddle.zeros_like(input_ids)
        for word in self.negation_exception_ids:
            covered = covered + self._ends_at(input_ids, word, spread=True)
        return negator * (covered == 0).astype('int64')

    def negated(self, input_ids):
        """int64 [B, L]: 1 where a negator stands 1 to ``negation_window`` chars before, with no
        clause break from it up to here; 0 elsewhere (and everywhere without negators)."""
        return (self._scope(input_ids, self.negators(input_ids)) > 0).astype('int64')

    def _ends_at(self, input_ids, word, spread=False):
        """int64 [B, L]: 1 at the last char of each occurrence of ``word`` (ids); with ``spread``,
        at every char of it."""
        hit = paddle.ones_like(input_ids)
        for back, i in enumerate(reversed(word)):      # the word's last char here, the one before it ...
            match = (input_ids == paddle.full_like(input_ids, i)).astype('int64')
            hit = hit * (self._shifted(match, back) if back else match)
        if not spread:
            return hit
        # Move the end marks back over the word: x[t] = hit[t + k] for k < len(word).
        covered = hit
        for k in range(1, len(word)):
            covered = covered + paddle.concat([hit[:, k:], paddle.zeros_like(hit[:, :k])], axis=1)
        return covered

    def after_contrast(self, input_ids):
        """float32 [B, L]: 1 from the last char of a contrast connective to the end of the text."""
        ends = paddle.zeros_like(input_ids)
        for word in self.contrast_ids:
            ends = ends + self._ends_at(input_ids, word)
        return (paddle.cumsum(ends.astype('float32'), axis=1) > 0).astype('float32')

    def wide_logits(self, input_ids, short=False):
        """Logits of the linear n-gram model (``short``: the short texts' own, ``short_wide``);
        zero-id (padding, invalid window) rows count nothing.  Where the part has a negated table, an
        n-gram that starts inside a negation's scope is looked up in it instead."""
        prefix = "wide_short_" if short else "wide_"
        tables = [getattr(self, prefix + name) for name in ("uni", "bi", "tri")]
        negated_table = getattr(self, prefix + "negated", None)
        bias = getattr(self, prefix + "bias")
        mask_i = (input_ids > 0).astype('int64')
        negated = self.negated(input_ids) if negated_table is not None else None
        total, count = 0.0, 0.0
        for n, table in zip((1, 2, 3), tables):
            ids = input_ids * mask_i if n == 1 else hash_ngrams(input_ids, mask_i, n, self.wide_buckets)
            valid = (ids > 0).astype('float32').unsqueeze(-1)
            if negated is None:
                total = total + (table(ids) * valid).sum(axis=1)
            else:
                # Each order its own buckets of the negated table (a salt n), as hash_ngrams's ids are.
                salted = paddle.remainder(ids * paddle.full_like(ids, 7919) + paddle.full_like(ids, n),
                                          paddle.full_like(ids, self.wide_buckets - 1)) + 1
                inside = valid * negated.astype('float32').unsqueeze(-1)
                swapped = paddle.flip(table(ids), axis=[-1]) + negated_table(salted)
                total = total + (table(ids) * (valid - inside)).sum(axis=1) + (swapped * inside).sum(axis=1)
            count = count + valid.sum(axis=1)
        return total / paddle.sqrt(paddle.clip(count, min=1.0)) + bias

    def forward(self, input_ids):
        deep = self.deep_probs(input_ids)
        if self.wide_buckets <= 0:
            return deep
        wide = F.softmax(self.wide_logits(input_ids), axis=-1)
        if self.short_length <= 0:
            return self.deep_weight * deep + (1.0 - self.deep_weight) * wide
        short = self.is_short(input_ids)
        long_mix = self.deep_weight * deep + (1.0 - self.deep_weight) * wide
        if self.short_wide:
            wide = F.softmax(self.wide_logits(input_ids, short=True), axis=-1)
        short_mix = self.short_deep_weight * deep + (1.0 - self.short_deep_weight) * wide
        return short * short_mix + (1.0 - short) * long_mix

    def is_short(self, input_ids):
        """float32 [B, 1]: 1 for a text of at most ``short_length`` chars."""
        length = (input_ids > 0).astype('float32').sum(axis=1, keepdim=True)
        return (length <= paddle.full_like(length, float(self.short_length))).astype('float32')

    def deep_probs(self, input_ids):
        mask_i = (input_ids > 0).astype('int64')
        mask = mask_i.astype('float32').unsqueeze(-1)                 # [B, L, 1]
        length = paddle.clip(mask.sum(axis=1), min=1.0)               # [B, 1]
        feats = [self.char_emb(input_ids)]
        if self.bigram_buckets > 0:
            ids2 = hash_ngrams(input_ids, mask_i, 2, self.bigram_buckets)
            feats.append(self.bigram_emb(ids2) * (ids2 > 0).astype('float32').unsqueeze(-1))
        if self.trigram_buckets > 0:
            ids3 = hash_ngrams(input_ids, mask_i, 3, self.trigram_buckets)
            feats.append(self.trigram_emb(ids3) * (ids3 > 0).astype('float32').unsqueeze(-1))
        x = paddle.concat(feats, axis=-1) * mask                      # zero pads: padding invariance
        plain = x
        if self.negator_ids:
            # The negation vector on the char part of the features (the polarity head reads them plain).
            negated = self.negated(input_ids).astype('float32').unsqueeze(-1) * self.negated_vec
            x = x + paddle.concat([negated, paddle.zeros_like(x[:, :, negated.shape[-1]:])], axis=-1) * mask
        bag = x.sum(axis=1) / length                                  # fastText-style mean of n-grams
        # Channels-first (NCL) convs: NLC convs get mis-laid-out by oneDNN in Paddle Inference.
        xd = self.dropout(x).transpose([0, 2, 1])
        mask_c = mask.transpose([0, 2, 1])                            # [B, 1, L]
        pooled, convolved = [bag], []
        for conv in self.convs:
            # ReLU output >= 0, so multiplying by the mask makes the pool an exact masked max-pool.
            # adaptive_max_pool1d instead of Tensor.max: the latter's CPU backward is ~100x slower.
            h = F.relu(conv(xd)) * mask_c
            convolved.append(h)
            pooled.append(F.adaptive_max_pool1d(h, 1).squeeze(-1))
        if self.polarity_head:
            pooled.append(self.polarity(input_ids, plain, paddle.concat(convolved, axis=1).transpose([0, 2, 1]),
                                        mask))
        if self.rnn is not None:
            # Real lengths, so padding changes nothing; pads at -1e4 before the max (states can be < 0).
            states, _ = self.rnn(self.dropout(x), sequence_length=mask_i.sum(axis=1))
            states = (states * mask + (mask - 1.0) * 1e4).transpose([0, 2, 1])
            pooled.append(F.adaptive_max_pool1d(states, 1).squeeze(-1))
        z = self.dropout(paddle.concat(pooled, axis=-1))
        if self.hidden is not None:
            z = self.dropout(F.relu(self.hidden(z)))
        return F.softmax(self.out(z), axis=-1)

    def polarity(self, input_ids, plain, convolved, mask):
        """float32 [B, 1]: the text's polarity as attention-weighted word polarities, flipped in
        the scope of each negator by its flip strength (the module's docstring).  ``plain``: the
        char + bigram features [B, L, D] without the negation vector, ``convolved``: the
        convolutions [B, L, C], ``mask``: [B, L, 1]."""
        word = self.lexicon(self.dropout(plain)).squeeze(-1)                               # [B, L]
        negator = self.negators(input_ids).astype('float32')
        strength = F.sigmoid(self.flip_gate(convolved).squeeze(-1)) * negator
        flip = 1.0 - 2.0 * paddle.clip(self._scope(input_ids, strength), max=1.0)
        mask = mask.squeeze(-1)
        score = self.attend(convolved).squeeze(-1)
        if self.contrast_ids:
            score = score + self.contrast_bonus * self.after_contrast(input_ids)
        weight = F.softmax(score * mask + (mask - 1.0) * 1e4, axis=-1)
        return (weight * flip * word).sum(axis=1, keepdim=True)
