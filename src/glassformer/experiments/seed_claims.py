"""The seed sentences the checks test, quoted with their sections, and how the evidence is reconciled.

A row of docs/claims.md used to hold several seed sentences and print one verdict for all of them
(issue 28: seed 000's exact identity PE(pos+k) = M_k·PE(pos) read "does not hold" because it
shared a row with seed 003's false variant). Here every check names the seed sentence it tests,
and each seed sentence gets one reconciled verdict from the checks listed in `decides`, with the
reason those and not the others decide.

Reconciliation, the same rule for every claim: of the deciding checks, ignore those "not tested";
none left -> not tested; all hold -> holds; all do not hold -> does not hold; otherwise
inconclusive. The other checks of a claim are shown beside it as supporting evidence.

A seed sentence that says something does *not* matter ("Pre-LN needs no warmup") cannot be a check
of the form "A beats B by at least δ"; it is decided by the check of its negation ("warmup widens
Pre-LN's range of rates by ≥ δ"), listed in `against`, whose verdict is read the other way round:
its "holds" (the effect is there, at least δ) is the sentence's "does not hold", and its "does not
hold" (an effect of δ is excluded) the sentence's "holds". The page and docs/claims.json mark such
checks as `(negation)`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .verdict import FAILS, HOLDS, UNSURE, UNTESTED


@dataclass(frozen=True)
class SeedClaim:
    key: str
    section: str  # "seed 000 §4.4"
    quote: str  # the seed's own words
    english: str
    rows: tuple[str, ...] = ()  # every check of these rows tests this claim (unless claimed below)
    checks: tuple[tuple[str, str], ...] = ()  # (row, check) pairs taken from other claims' rows
    decides: tuple[tuple[str, str], ...] = ()  # empty: all main checks of the claim decide
    against: tuple[tuple[str, str], ...] = ()  # checks of the sentence's negation: decide, read the other way
    why: str = "all main checks of the claim decide; each tests the sentence directly"

    @property
    def text(self) -> str:
        return f"{self.section}: 「{self.quote}」 ({self.english})"


S = SeedClaim
SEED_CLAIMS: tuple[SeedClaim, ...] = (
    S("position-blind", "seed 000 §3.1", "如果我把输入 X 的行（各个词）任意排列……自注意力的输出也做对应的排列",
      "permute the words and self-attention's output is permuted the same way: without position, order is lost",
      rows=("pe-order",)),
    S("scaling", "seed 000 §1.5", "当 d_k 很大时，点积的方差会爆炸……梯度接近零，模型根本学不动",
      "for large d_k the dot product's variance explodes; a near one-hot softmax has near-zero gradient",
      rows=("scaling",)),
    S("residual", "seed 000 §4.1", "如果没有残差连接，深层根本不可训练",
      "without residual connections deep stacks cannot be trained", rows=("residual", "khop"),
      decides=(("residual", "12 layers: the residual model reaches a lower loss"),
               ("residual", "12 layers: the first layer gets a larger gradient with the residual (≥ ~3×)")),
      why="`residual` measures the two things the sentence names (trainability and the gradient at the input); "
          "`khop` is a task where depth should help, but no arm there learns 3-hop chasing, so it supports only"),
    S("post-ln-warmup", "seed 000 §4.4", "Post-LN 训练不稳定——需要特别小心的 warmup（学习率从 0 慢慢提升）……Pre-LN 训练更稳定",
      "Post-LN trains unstably and needs careful warmup; Pre-LN is more stable",
      rows=("norm-placement", "real-norm"),
      why="`norm-placement`'s learning-rate × warmup grid decides (6 layers, d_model 256, rates 3e-4 to 1e-2, 5 seeds "
          "per cell): with warmup Post-LN trains at 2 of the 4 rates, without it at 1, and its best loss over the "
          "rates is 0.19 nats lower with warmup; without warmup Pre-LN trains at 2 rates against Post-LN's 1. A "
          "Post-LN run that fails stays on the uniform answer's plateau (ln 64) rather than going to NaN. The 3e-3 "
          "column is the first design's unreported pilot: Post-LN trains there under neither schedule. `real-norm` "
          "(English text, 4 layers at d_model 128, 3,000 steps, past its 4-gram gate since 2026-12-06) decides too: "
          "with each arm's rate swept, Post-LN without warmup trains well only at 1e-3 (at 3e-3 one sweep seed of "
          "two stalls at 2.86 nats/char, at 1e-2 both at 3.50) and ends 0.128 nats/char behind Post-LN with warmup "
          "(3e-3) and 0.114 behind Pre-LN without warmup (3e-3)"),
    S("pre-ln-no-warmup", "seed 000 §4.4", "Pre-LN 训练更稳定，不需要 warmup",
      "Pre-LN trains more stably and needs no warmup",
      against=(("norm-placement", "(the seed says Pre-LN needs none) warmup widens Pre-LN's range of rates too"),),
      why="decided by its negation in `norm-placement`'s grid: warmup widens Pre-LN's range too, from 2 of the 4 "
          "rates (3e-4, 1e-3) to 3 (up to 3e-3) in every seed, so 'needs no warmup' does not hold as written. The "
          "comparative reading holds: without warmup Pre-LN trains at as many rates as Post-LN with it (2 each), and "
          "at more than Post-LN without it (the `post-ln-warmup` checks). `real-norm` on English text agrees, read "
          "from its table, not a check: Pre-LN with warmup takes a rate of 1e-2 and reaches 1.735 nats/char, "
          "without warmup its best rate is 3e-3 (1e-2 validates 0.18 worse) and it reaches 1.770"),
    S("post-ln-gradients", "seed 000 §4.4", "否则梯度会爆炸",
      "(without warmup, Post-LN's) gradients explode", rows=("ln-gradients",),
      checks=(("norm-placement", "'gradients explode': Post-LN without warmup diverges (NaN/inf) more often than "
                                 "with it"),),
      why="the gradient mechanism of Xiong et al. 2020 at initialisation decides, read two ways at the row's "
          "default depth of 6 layers: Post-LN's growth toward the output against Pre-LN's, and Post-LN's own growth "
          "against a flat profile (the first alone could hold because Pre-LN's gradient falls toward the output, "
          "with Post-LN's hardly rising); the 12- and 24-layer checks show how both change with depth. "
          "`norm-placement`'s grid supports only: none of its 80 runs went to NaN or inf"),
    S("batchnorm", "seed 000 §5.3", "batch size 小时不稳定……那些填充位的值会干扰归一化的统计量",
      "BatchNorm is unstable at small batch sizes and padding disturbs its statistics", rows=("norm-type",)),
    S("sin-extrapolation", "seed 000 §3.3", "模型在训练时见过 0-511 的位置，推理时可以处理 512-1023 的位置（虽然效果可能略差，但不会完全失效）",
      "a model trained on positions 0–511 can process 512–1023: perhaps slightly worse, but it does not fail",
      checks=(("pe-extrapolation", "sinusoidal at 2L does not fail completely (below the uniform guess)"),),
      why="the sentence read literally decides: past the training length the sinusoidal model's loss on the "
          "positions ≥ L only, against the uniform guess (ln 8) — the test of 「不会完全失效」. Until 2026-12-02 the "
          "comparisons with a learned table decided it; they test the next paragraph's claim (learned tables "
          "collapse), and now decide that one"),
    S("learned-collapse", "seed 000 §3.3", "如果推理时遇到了位置 1024，那个位置的向量从未被训练过，模型会崩溃",
      "(a learned table:) at a position never trained the model collapses, so sinusoids extrapolate better",
      rows=("pe-extrapolation", "recall-extrapolation", "real-pe"),
      why="the comparisons of sinusoidal against a learned table past L decide, each on positions ≥ L only and with "
          "the table initialised at the token vectors' scale (rows ≥ L never trained), except those whose arms "
          "never learned the task at the training length (gate). With the token-scale table, the learned arm no "
          "longer learns recall at the training length (0 of 5 seeds). The text row (`real-pe`, past its 4-gram "
          "gate since 2026-12-06) decides too; there the arm with no positional encoding is better past L than "
          "both (the row's table), so sinusoids extrapolate better than a learned table, not well"),
    S("alibi-inverse", "seed 003 §3", "ALiBi直接用一个与距离成反比的偏置项替代正弦编码",
      "ALiBi replaces the sinusoids with a bias inversely proportional to distance", rows=("alibi-distance",)),
    S("alibi-better", "seed 003 §3", "效果更好且支持更长序列",
      "(ALiBi) works better and supports longer sequences",
      checks=(("pe-extrapolation", "ALiBi beats sinusoidal at 4L"),
              ("recall-extrapolation", "copy: ALiBi beats sinusoidal at 256 (8× the training length)"),
              ("recall-extrapolation", "recall: ALiBi beats sinusoidal at 256 (8× the training length)"),
              ("real-pe", "ALiBi beats sinusoidal at 4L = 256"))),
    S("rope", "seed 000 §3.5", "RoPE……外推能力更好", "RoPE extrapolates better",
      checks=(("pe-extrapolation", "RoPE beats sinusoidal at 4L"), ("real-pe", "RoPE beats sinusoidal at 4L = 256"))),
    S("pe-shift-linear", "seed 000 §3.3", "可以通过 PE_pos 的线性变换得到 PE_pos+k",
      "PE(pos+k) is a linear transformation of PE(pos), so the model can attend by relative distance",
      rows=("pe-relative-use",), checks=(("pe-linear", "PE(pos+k) = M_k·PE(pos) for one fixed M_k (k = 7)"),),
      decides=(("pe-linear", "PE(pos+k) = M_k·PE(pos) for one fixed M_k (k = 7)"),),
      why="the sentence is an identity: the exact check decides; `pe-relative-use` (whether training uses it) supports"),
    S("pe-difference-linear", "seed 003 §3", "PE(p)-PE(q)可以被表示为PE(p-q)的线性函数",
      "PE(p) − PE(q) is a linear function of PE(p − q)",
      checks=(("pe-linear", "PE(p) − PE(q) is a linear function of PE(p − q)"),)),
    S("arange", "seed 003 §3", "用torch.arange(max_len)生成位置索引却忘了将其转换为浮点类型。结果……整个位置编码矩阵变成全零",
      "an integer torch.arange makes the whole encoding zero", rows=("arange-pe",)),
    S("add-concat", "seed 000 §3.4", "实际效果：Add 比 Concat 好", "adding the encoding works better than concatenating it",
      rows=("pe-add-concat",)),
    S("heads", "seed 000 §2.1", "如果只给你一个\"注意力头\"……很少能同时学到所有这些东西",
      "one attention head rarely learns several kinds of relation at once", rows=("heads", "real-heads"),
      why="the synthetic two-relation task and English text decide together: on text, trained past the character "
          "4-gram (d_model 128, 5,000 steps), 8 heads beat 1 by more than Vaswani Table 3 (A)'s gap (at d_model 64 "
          "and 600 steps the row stopped at trigram level, where one head was as good as four, and was not "
          "tested). Sixteen heads of d_k = 8 lose to eight (a side check: Table 3 (A) has them level). '2 heads "
          "beat 1' sits at the edge of the family: it held at its Holm level when the family had 29 checks and is "
          "inconclusive now that it has more (the same numbers; a stricter level)"),
    S("dk-64", "seed 003 §2", "64是工程实践中的经验平衡点太小如16导致每个头能捕捉的模式太单薄太大如128则头数变少多样性下降",
      "d_k = 64 is the balance point: 16 is too thin, 128 leaves too few heads", rows=("dk-sweet-spot",),
      checks=(("heads", "seed 003 §2: d_k = 16 (h = 4) beats d_k = 4 (h = 16): 'too small a d_k is too thin'"),)),
    S("head-slices", "seed 003 §2", "它拿到的不是完整512维向量而是每个词向量的前64维切片",
      "head 1 receives only the first 64 of the 512 dimensions", rows=("head-slices",)),
    S("concat-wo", "seed 003 §2", "为什么必须拼接后再过W^O因为八个头的输出是异构的……直接相加会破坏各自的物理意义",
      "the heads must be concatenated and passed through W^O; adding them would destroy their meaning",
      rows=("concat-wo",)),
    S("ffn-role", "seed 000 §6.3", "前馈网络：逐位置的。每个词关起门来，在自己的表示空间里做非线性变换。这是\"思考\"",
      "the FFN, position by position, is where the model 'thinks' (the non-linear recombination)",
      rows=("ffn", "ffn-capacity", "real-ffn"),
      decides=(("ffn-capacity", "N = 16384: an FFN (4×) recalls more facts than a parameter-matched attention-only "
                                "model (3 attention layers, no FFN)"),),
      why="`ffn-capacity`'s parameter-matched check decides: the FFN of 4× (58,560 parameters) against 3 attention "
          "layers without an FFN (59,264: same width, embeddings and head, the FFN's parameters given to attention); "
          "every 'FFN beats no FFN' check (`ffn`, `real-ffn`, `ffn-capacity`) also adds the FFN's parameters (33k in "
          "`ffn`; 263k in `real-ffn`, whose FFN-less model has 163k), so it cannot tell the FFN from its size. "
          "N = 16,384 facts puts both matched arms far from the ceiling (at 4,096 both "
          "recalled all but ~0.4%); there the deeper attention-only model recalls as much as the FFN, so the claim "
          "that the FFN is where the capacity lies is not borne out at matched size. The wider matched arm "
          "(d_model 104) recalls far less than either: how the parameters are spent matters more than FFN or not"),
    S("ffn-share", "seed 003 §5", "以BERT-base为例其总参数约1.1亿其中FFN部分占约70%每个Block有两个FFN",
      "in BERT-base (≈ 110M parameters) the FFN is ≈ 70%, two FFNs per block", rows=("ffn-share",)),
    S("rnn-speed", "seed 000 §8.1", "Transformer 处理一个 512 词的句子比 RNN 快 10-100 倍（取决于序列长度和硬件）",
      "the Transformer processes a 512-word sentence 10–100× faster than an RNN (depending on length and hardware)",
      rows=("rnn",),
      why="the timing on parallel hardware decides (the claim is about a GPU); a row run where there is none times "
          "nothing and its checks say so, since a 2-thread CPU timing tests the machine, not the sentence"),
    S("long-range", "seed 000 §8.2", "Transformer 天然适合处理远距离依赖",
      "the Transformer is naturally suited to long-range dependencies",
      checks=(("rnn", "the Transformer learns the long-range dependency better"),)),
    S("attention-cost", "seed 000 §8.1", "自注意力的计算复杂度是 O(n²·d)", "self-attention costs O(n²·d)",
      rows=("attention-cost",)),
    S("convergence", "seed 000 §7.4", "所有词对之间的相似度都上升了", "every pair of words becomes more similar",
      rows=("representation-convergence",),
      why="both main checks decide, each with the anisotropy change subtracted: MiniLM's (the cross-sentence "
          "cosine) and the trained LM's (the cosine between two held-out windows). MiniLM (all-MiniLM-L6-v2) is a contrastively trained "
          "sentence encoder, not a plain MLM: its last layer pushes different sentences apart (the cross-sentence "
          "cosine falls back there), so the side check at layer 5 is shown beside it"),
    S("locality", "seed 000 §2.6", "浅层（接近输入的层）的头更多关注局部模式，深层（接近输出的层）的头更多关注全局/抽象模式",
      "heads in shallow layers attend locally, heads in deep layers globally", rows=("attention-locality",),
      why="both main checks decide: MiniLM's among the words only ([CLS]/[SEP] removed as queries and keys, so a "
          "head parked on a sink does not count as attending far; the distance with them is a side check) and the "
          "causal LM's"),
    S("no-layernorm", "seed 003 §4", "移除LayerNorm后即使有残差连接训练loss在第3个epoch就开始剧烈震荡验证集准确率停滞在随机水平",
      "without LayerNorm, even with residuals, the loss oscillates and validation accuracy stays at chance",
      rows=("no-layernorm",),
      why="the main check decides, on the ReZero arm (no LayerNorm anywhere, residual kept, each sublayer's output "
          "× a learned α initialised at 0): it starts at a held-out loss of 4.95 nats (ln 64 = 4.16; the first "
          "design without LayerNorm started at ~2,000, so it failed at step 0 from its scale), and the row's gate "
          "reads it only within 1.5 nats of ln 64; the arm with only a final LayerNorm before the head (4.73 at "
          "step 0, its stream still growing through the blocks) supports"),
    S("paper-pre-norm", "seed 003 §4", "原始论文将它放在每个子层MultiHeadAtt和FFN的输入端即先Norm再计算子层。这被称为“pre-norm”",
      "the original paper puts LayerNorm at each sublayer's input (pre-norm)", rows=("paper-norm",)),
    S("variance-growth", "seed 000 §4.4", "Post-LN 中，残差路径的输入可能被前面层的累积效应偏移，导致子层接收到的信号方差越来越大",
      "in Post-LN the sublayers receive a signal whose variance keeps growing", rows=("ln-init-variance",),
      why="the main check decides (Post-LN's sublayer input); Pre-LN's growing stream is the side check that says what grows instead"),
    S("why-three", "seed 000 §1.9", "Q 和 K 分工：Q 负责\"提问\"……K 负责\"被找到\"",
      "Q and K have different jobs, so they need separate projections", rows=("tied-qk",),
      why='the main check decides: speed to a loss bar, since both arms reach ≈ 99% accuracy on lag(1)'),
    S("head-specialisation", "seed 000 §2.3", "把\"词义空间\"切成 h 个子空间。每个子空间捕捉一种语言特征维度……这不是设计，是涌现",
      "the heads split the space into h subspaces, each capturing its own kind of feature: emergent, not designed",
      rows=("head-pruning",),
      why="both main checks decide: heads differ in importance (pruning by importance beats random pruning) and, "
          "as Michel et al. 2019 found, 40% of them can go with little loss; MiniLM is a contrastive sentence "
          "encoder with no MLM head, so the quality proxy is its own sentence embedding"),
    S("ffn-neurons", "seed 003 §5", "当输入包含“breach of contract”违约时FFN的第1247个神经元会持续高激活……这表明FFN确实在学习将注意力机制捕获的粗粒度关联转化为细粒度的、领域特定的语义特征",
      "single FFN neurons fire on specific inputs ('breach of contract' → neuron 1247): the FFN's neurons are "
      "keys for recognisable patterns (Geva et al. 2021: key-value memories)", rows=("ffn-memories",),
      why="the main check decides: token-selective neurons against a shuffled-activation baseline, a lower bound "
          "(only the shallowest pattern, the same token, is counted)"),
    S("multi-granularity", "seed 000 §3.3", "这捕捉局部相邻关系——\"这个词左右两三个词是谁\"……这捕捉全局位置关系——"
      "\"这个位置在句首、句中还是句末\"",
      "(reason three, multi-granularity) the high-frequency dimensions (low i) capture local relations, who the "
      "two or three words around a word are; the low-frequency ones (high i) capture global position, start, "
      "middle or end of the sentence", rows=("pe-frequency-bands",),
      why="both main checks decide, one per half of the sentence: the high band against the low band on a local "
          "task (lag 2) and the low band against the high band on a global one (which third of its row); the "
          "bands are placed by the row length, so the seed's literal lowest pairs (λ ≥ 6,283, nearly constant over "
          "a sentence) are a side arm, and the all-band checks support"),
)


def claim_of(row: str, check: str) -> SeedClaim | None:
    """The seed claim a check tests: an explicit (row, check) pair first, then the row."""
    for c in SEED_CLAIMS:
        if (row, check) in c.checks or (row, check) in c.against:
            return c
    for c in SEED_CLAIMS:
        if row in c.rows:
            return c
    return None


def negate(verdict: str) -> str:
    """A check of the sentence's negation, read as a check of the sentence."""
    return {HOLDS: FAILS, FAILS: HOLDS}.get(verdict, verdict)


def reconcile(verdicts: list[str]) -> str:
    """The rule of the module docstring."""
    tested = [v for v in verdicts if v != UNTESTED]
    if not tested:
        return UNTESTED
    if all(v == HOLDS for v in tested):
        return HOLDS
    if all(v == FAILS for v in tested):
        return FAILS
    return UNSURE
