"""Sentiment classifier for taskflow: char CNN + hashed char n-gram bag, trained from scratch.

Why this architecture: without a pretrained encoder the strongest cheap signals for Chinese review
sentiment are (a) short char n-grams ("不错", "不太好", "差评") and (b) their local composition with
negation/degree words. A fastText-style bag of char uni/bi/tri-gram embeddings captures (a) and is
robust on short texts; a multi-width CNN with masked max pooling captures (b) and long reviews.
Both only need char ids: bigram/trigram ids are hashed inside the network from adjacent char ids,
so the product keeps a single int64 input and a plain char vocabulary.
"""
import paddle
import paddle.nn as nn
import paddle.nn.functional as F


class SentimentNet(nn.Layer):
    def __init__(self, vocab_size, embed_dim=128, bigram_buckets=50000, trigram_buckets=0,
                 ngram_dim=64, conv_channels=192, max_kernel=5, hidden_size=0,
                 num_labels=2, dropout=0.3):
        super().__init__()
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
            nn.Conv1D(in_dim, conv_channels, k, padding=k // 2, data_format='NCL')
            for k in self.kernels])
        feat_dim = in_dim + conv_channels * len(self.kernels)
        self.hidden = nn.Linear(feat_dim, hidden_size) if hidden_size > 0 else None
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden_size if hidden_size > 0 else feat_dim, num_labels)

    def _hash(self, ids, mask, n, buckets):
        # Rolling hash of n adjacent char ids (int64: vocab * prime^2 stays far from overflow).
        # Id 0 is reserved for "no n-gram here" so invalid windows contribute nothing.
        h = ids
        valid = mask
        for i in range(1, n):
            nxt = \
                paddle.concat([ids[:, i:], paddle.zeros_like(ids[:, :i])], axis=1)
            h = h * 1000003 + nxt
            valid = valid * (nxt > 0).astype('int64')
        h = paddle.remainder(h, paddle.full_like(h, buckets - 1)) + 1
        return h * valid

    def forward(self, input_ids):
        mask_i = (input_ids > 0).astype('int64')
        mask = mask_i.astype('float32').unsqueeze(-1)                 # [B, L, 1]
        length = paddle.clip(mask.sum(axis=1), min=1.0)               # [B, 1]
        feats = [self.char_emb(input_ids)]
        if self.bigram_buckets > 0:
            ids2 = self._hash(input_ids, mask_i, 2, self.bigram_buckets)
            feats.append(self.bigram_emb(ids2) * (ids2 > 0).astype('float32').unsqueeze(-1))
        if self.trigram_buckets > 0:
            ids3 = self._hash(input_ids, mask_i, 3, self.trigram_buckets)
            feats.append(self.trigram_emb(ids3) * (ids3 > 0).astype('float32').unsqueeze(-1))
        x = paddle.concat(feats, axis=-1) * mask                      # zero pads: padding invariance
        bag = x.sum(axis=1) / length                                  # fastText-style mean of n-grams
        xd = self.dropout(x)
        pooled = [bag]
        for conv in self.convs:
            # ReLU output >= 0, so multiplying by the mask is an exact masked max-pool.
            h = F.relu(conv(xd.transpose([0, 2, 1]))).transpose([0, 2, 1]) * mask
            pooled.append(h.max(axis=1))
        z = self.dropout(paddle.concat(pooled, axis=-1))
        if self.hidden is not None:
            z = self.dropout(F.relu(self.hidden(z)))
        return F.softmax(self.out(z), axis=-1)
