"""The time-to-quality suite of issue 32 (bench/real/): its datasets, their hold-out, the curve script."""

from __future__ import annotations

import datetime
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from glassformer.cli import main as glassformer_main

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "bench" / "real"


def _load(name: str):
    if str(REAL) not in sys.path:
        sys.path.insert(0, str(REAL))  # curves.py imports its neighbours prepare and simple
    spec = importlib.util.spec_from_file_location(f"bench_real_{name}", REAL / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


prepare = _load("prepare")
curves = _load("curves")
SPEC = json.loads((REAL / "datasets.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Every dataset written once, as `prepare.py DIR` writes it: {name: (train lines, test lines)}."""
    root = tmp_path_factory.mktemp("real-data")
    out = {}
    for name in prepare.NAMES:
        train, test = prepare.build(name, root)
        out[name] = (train.read_text(encoding="utf-8").splitlines(), test.read_text(encoding="utf-8").splitlines())
    out["_root"] = root
    return out


# ---- the dataset-level hold-out ----
def test_development_and_evaluation_are_disjoint_and_cover_every_dataset():
    dev, ev = set(SPEC["development"]), set(SPEC["evaluation"])
    assert not dev & ev
    assert dev | ev == set(SPEC["datasets"]) == set(prepare.BUILDERS)
    assert len(dev | ev) >= 8
    kinds = Counter((name in ev, SPEC["datasets"][name]["kind"]) for name in dev | ev)
    # the issue: transductions G2P, pinyin and two more; fortunes en/zh and two more LM texts
    assert kinds[True, "tsv"] >= 2 and kinds[True, "lm"] >= 2
    assert {"g2p", "pinyin", "lm-en", "lm-zh"} <= dev  # the datasets the recipe was tuned on


# ---- every dataset's split ----
@pytest.mark.parametrize("name", prepare.NAMES)
def test_each_dataset_has_non_empty_disjoint_splits(built, name):
    train, test = built[name]
    assert train and test and all(ln.strip() for ln in train + test)
    assert len(test) < len(train)
    if prepare.kind(name) == "lm":
        train_docs, test_docs = prepare.LM_DOCS[name]()
        assert not set(train_docs) & set(test_docs)  # documents are held out whole, none seen in training
        assert prepare.doc_lines(train_docs) == train and prepare.doc_lines(test_docs) == test
        n = len(set(train_docs) | set(test_docs))
        assert abs(len(test_docs) - 0.1 * n) <= 0.002 * n + 1  # 10% held out (less the duplicates dropped)
        if name in SPEC["evaluation"]:  # and few of their long lines recur in another document
            seen = set(train)
            long_lines = [ln for ln in test if len(ln) > 40]
            assert long_lines and sum(ln in seen for ln in long_lines) / len(long_lines) < 0.02
        return
    pairs = [ln.split("\t") for ln in train + test]
    assert all(len(p) == 2 and p[0] and p[1] for p in pairs)
    train_src = {ln.split("\t")[0] for ln in train}
    test_src = {ln.split("\t")[0] for ln in test}
    assert not train_src & test_src  # no test source is seen in training
    assert len(train_src) == len(train)  # one training target per source
    expected = {"g2p": 12_000, "pinyin": 5_000}.get(name, prepare.TEST)
    assert len(test_src) == expected


def test_the_split_is_the_same_every_time(built, tmp_path):
    for name in ("date-fr", "lm-pydoc"):
        train, test = prepare.build(name, tmp_path)
        assert train.read_text(encoding="utf-8").splitlines() == built[name][0]
        assert test.read_text(encoding="utf-8").splitlines() == built[name][1]


def test_the_transductions_against_hand_references(built):
    # num2words: a number read out by hand
    from num2words import num2words
    assert num2words(1234567) == ("one million, two hundred and thirty-four thousand, five hundred and "
                                  "sixty-seven")
    nums = [ln.split("\t") for ln in built["num-en"][0] + built["num-en"][1]]
    assert len({int(s) for s, _ in nums}) == prepare.NUMBERS == len(nums)
    ones = "zero one two three four five six seven eight nine".split()
    for s, words in nums:
        if len(s) == 1:
            assert words == ones[int(s)]
        if s.endswith("00") and len(s) == 3:
            assert words == f"{ones[int(s[0])]} hundred"
    # French dates: the month names of the calendar, written out here
    months = ["janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre",
              "novembre", "décembre"]
    dates = [ln.split("\t") for ln in built["date-fr"][0] + built["date-fr"][1]]
    assert len(dates) == prepare.DATES
    for iso, long in dates:
        d = datetime.date.fromisoformat(iso)
        assert datetime.date(1600, 1, 1) <= d <= datetime.date(2099, 12, 31)
        assert long == f"{d.day} {months[d.month - 1]} {d.year}", (iso, long)  # CLDR's fr: "1 mai", not "1er"
    # Japanese readings: kanji (and kana) in, hiragana out; readings known by hand
    reading = dict(prepare.kana_pairs())
    assert reading["東京"] == "とうきょう" and reading["日本語"] == "にほんご"
    kana = [ln.split("\t") for ln in built["kana"][0] + built["kana"][1]]
    assert len(kana) == prepare.KANA_WORDS
    assert all(re.fullmatch(r"[\u3041-\u309f\u30fc]+", r) for _, r in kana)
    assert sum(re.search(r"[\u4e00-\u9fff]", w) is not None for w, _ in kana) > 0.95 * len(kana)


def test_the_lm_texts_against_published_counts(built):
    # WordNet 3.0 has 117,659 synsets (82,115 nouns, 13,767 verbs, 18,156 adjectives, 3,621 adverbs)
    lines = prepare.wordnet_lines()
    assert len(lines) == 117_659
    assert "entity: that which is perceived or known or inferred to have its own distinct existence " \
           "(living or nonliving)" in lines
    train, test = built["lm-wordnet"]
    assert len(train) + len(test) == len(set(prepare.random.Random(0).sample(lines, prepare.WORDNET_SYNSETS)))
    assert len(test) == round(0.1 * prepare.WORDNET_SYNSETS)
    # the Jargon File without its box-drawn tables
    jargon = "\n".join(built["lm-jargon"][0])
    assert "The Jargon File" in jargon and not re.search(r"[\u2500-\u257f]", jargon)
    # Python's reference manual: a sentence of the assert statement's topic
    assert any("assert" in ln for ln in built["lm-pydoc"][0] + built["lm-pydoc"][1])


# ---- the curve script ----
def test_first_beats_on_hand_made_curves():
    ours = {2.0: 0.50, 5.0: 0.70, 10.0: 0.80, 30.0: 0.86}
    assert curves.first_beats(ours, 0.75, higher=True) == 10.0
    assert curves.first_beats(ours, 0.80, higher=True) == 30.0  # a tie at 10 is not a win
    assert curves.first_beats(ours, 0.90, higher=True) is None
    plain = {2.0: 0.55, 5.0: 0.65, 10.0: 0.85, 30.0: 0.85}  # compared at equal minutes
    assert curves.first_beats(ours, plain, higher=True) == 5.0
    assert curves.first_beats(ours, {10.0: 0.79}, higher=True) == 10.0  # budgets missing on one side skipped
    bpc = {2.0: 2.5, 5.0: 2.1, 10.0: 1.95, 30.0: 1.80}
    assert curves.first_beats(bpc, 2.0, higher=False) == 10.0
    assert curves.first_beats(bpc, 1.5, higher=False) is None
    r = curves.summarise("lm-pydoc", {m: {"bpc": v} for m, v in bpc.items()},
                         {m: {"bpc": v + 0.3, "minutes": m} for m, v in bpc.items()},
                         {"n-gram": {"value": 2.0, "description": "a 5-gram"}})
    assert r["first_beats"] == {"n-gram": 10.0, "plain PyTorch": 2.0}
    table = curves.table({"lm-pydoc": r}, sorted(bpc))
    row = [ln for ln in table.splitlines() if ln.startswith("| lm-pydoc")][0]
    assert "| eva |" in row and "1.950" in row and "2.250" in row and "n-gram: 10 min" in row


def _in_process(cmd: list[str], log: Path, env: dict | None = None) -> None:
    """curves.run_logged, but each command run in this process (no interpreter and torch start-up
    per run: the same command lines, seconds instead of a minute)."""
    import contextlib
    with log.open("w", encoding="utf-8") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
        if cmd[1:3] == ["-m", "glassformer"]:
            mp = pytest.MonkeyPatch()
            mp.setattr(sys, "argv", ["glassformer", *cmd[3:]])
            try:
                glassformer_main()
            except SystemExit as e:
                assert e.code in (0, None), log.read_text(encoding="utf-8")
            finally:
                mp.undo()
        else:
            assert Path(cmd[1]).name == "plain_torch.py"
            _load("plain_torch").cli(cmd[2:])  # through its argument parser, as the script runs


def test_the_longest_match_baseline_by_hand():
    train = [("東京", "とうきょう"), ("銀行", "ぎんこう"), ("東", "ひがし")]
    test = [("東京銀行", "とうきょうぎんこう"), ("東行", "ひがしこう"), ("西東", "にしひがし")]
    # 東京銀行 = 東京 + 銀行 (right); 東行 = 東 + 行, 行 from the character dictionary (right);
    # 西 is in neither and is copied: "西ひがし" (wrong) -> 2 of 3
    r = curves.longest_match(train, test, {"行": "こう", "東": "とう"})  # a training piece beats the dictionary
    assert r["exact_match"] == pytest.approx(2 / 3)
    words = curves.longest_match([("butter", "B AH T ER"), ("fly", "F L AY")],
                                 [("butterfly", "B AH T ER F L AY"), ("flutter", "F L AH T ER")])
    assert words["exact_match"] == 0.5  # "flutter": fly is no prefix of it, so f, l, u... are copied


def test_the_curve_script_runs_end_to_end(built, tmp_path, monkeypatch):
    monkeypatch.setattr(curves, "run_logged", _in_process)
    out = tmp_path / "suite"
    names = ["date-fr", "lm-pydoc"]
    for name in names:  # the full files, already written by the fixture (prepare.py's job)
        for f in prepare.files(name, built["_root"]):
            (out / "data").mkdir(parents=True, exist_ok=True)
            shutil.copy(f, out / "data" / f.name)
    argv = ["--out", str(out), "--datasets", *names, "--minutes", "0.02", "0.04", "--sample", "200",
            "--threads", "1"]
    results = curves.main(argv)
    assert list(results) == names
    saved = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert saved == json.loads(json.dumps(results))
    # the sub-sample: the first 200 training items and 20 test items of each dataset
    small = prepare.files("date-fr", out / "data-sample200")
    assert small[0].read_text(encoding="utf-8").splitlines() == built["date-fr"][0][:200]
    assert len(small[1].read_text(encoding="utf-8").splitlines()) == 20
    for name in names:
        r = saved[name]
        assert set(r["ours"]) == set(r["plain"]) == {"0.02", "0.04"}
        assert r["role"] == "evaluation"
        assert all(v is not None for v in r["ours"].values())
        assert set(r["first_beats"]) == set(r["baselines"]) | {"plain PyTorch"}
        for m, detail in r["ours_detail"].items():
            assert (out / "ours" / f"{name}-{m}" / "best").is_dir() and detail["steps"] >= 1
    # the LM baseline is the n-gram of the sub-sample, the transduction's the per-token majority
    assert saved["lm-pydoc"]["baselines"]["n-gram"]["order"] in range(1, 8)
    assert 0.0 <= saved["date-fr"]["baselines"]["majority"]["value"] <= 1.0
    table = (out / "table.md").read_text(encoding="utf-8")
    assert "| date-fr | eva | exact match" in table and "| lm-pydoc | eva | bits/char" in table
    png = (out / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    # resumable: a second call runs nothing (every run's test JSON is there) and gives the same numbers
    stamp = {p: p.stat().st_mtime_ns for p in (out / "ours").glob("*-test.json")}
    again = curves.main(argv)
    assert json.loads(json.dumps(again)) == saved
    assert {p: p.stat().st_mtime_ns for p in (out / "ours").glob("*-test.json")} == stamp


@pytest.mark.parametrize("script, argv, says", [
    ("prepare.py", ["--help"], "usage: prepare.py"),  # a flag is never taken for the output folder
    ("prepare.py", ["OUT", "klingon"], "unknown dataset 'klingon'; choose from g2p"),
    ("plain_torch.py", ["kana", "DATA", "o.jsonl", "ten"], "'ten' is not minutes such as 10 or 2,5,10"),
    ("plain_torch.py", ["kana", "DATA", "o.jsonl", "0,5"], "every mark must be a positive number"),
    ("plain_torch.py", ["kana", "nowhere", "o.jsonl", "5"], "'nowhere' is not a folder"),
    ("simple.py", ["nowhere", "o.json"], "'nowhere' is not a folder"),
    ("report.py", ["nowhere"], "'nowhere' is not a folder"),
    ("probe_check.py", ["nowhere"], "'nowhere' is not a folder"),
    ("probe_check.py", ["DATA", "--minutes", "0"], "--minutes must be positive numbers"),
    ("probe_check.py", ["DATA", "--runs", "DATA"], "is not a run folder (it has no metrics.jsonl)"),
    ("tagger.py", ["pinyin", "DATA", "10"], "pinyin-train.tsv does not exist: write it with"),
    ("tagger.py", ["toy", "DATA", "0"], "minutes 0: give a positive number"),
    ("tagger.py", ["toy", "DATA", "5", "--dropout", "1"], "--dropout 1: give a rate in [0, 1)"),
    ("tagger.py", ["toy", "DATA", "5", "--d-model", "30"], "--d-model 30: give a multiple of the 4 heads"),
    ("tagger.py", ["toy", "DATA", "5", "--layers", "0"], "--layers 0: give at least 1"),
    ("tagger.py", ["toy", "DATA", "5", "--max-steps", "0"], "--max-steps 0: give at least 1"),
    ("tagger.py", ["bad", "DATA", "5"], "bad-train.tsv:1: 1 tab-separated fields; a pair is SOURCE<tab>TARGET"),
    ("tagger.py", ["odd", "DATA", "5"], "1 of 3 training pairs are aligned character by token"),
])
def test_the_bench_scripts_refuse_bad_arguments_in_one_line(script, argv, says, tmp_path):
    data = tmp_path / "data"  # the tagger's small datasets: aligned, without a tab, a third aligned
    for name, lines in (("toy", ["ab\tA B"]), ("bad", ["ab A B"]), ("odd", ["ab\tA B", "ab\tAB", "abc\tAB"])):
        for split in ("train", "test"):
            (data / f"{name}-{split}.tsv").parent.mkdir(exist_ok=True)
            (data / f"{name}-{split}.tsv").write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
    before = sorted(tmp_path.rglob("*"))
    argv = [str(data) if a == "DATA" else str(tmp_path / a) if a == "OUT" else a for a in argv]
    r = subprocess.run([sys.executable, str(REAL / script), *argv], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert says in out and "Traceback" not in out
    assert r.returncode == (0 if argv == ["--help"] else 1 if says.endswith(("TARGET", "by token")) else 2)
    assert sorted(tmp_path.rglob("*")) == before  # nothing written: no folder named after a flag


def test_merged_runs_take_the_later_point_and_recompute_first_beats(tmp_path):
    """bench/real/merge.py: a later file's point replaces an earlier one's at the same budget, the
    baselines come from the file that has them, and "first beats" is read off the merged curve."""
    merge = _load("merge")
    a = {"_source": "a note", "lm-pydoc": {"ours": {"2": 2.5, "5": 2.0}, "plain": {"2": 4.0}}}
    b = {"lm-pydoc": {"ours": {"5": 1.9, "30": 1.6}, "plain": {},
                      "baselines": {"n-gram": {"value": 1.7, "description": "7-gram"}}}}
    files = []
    for name, data in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps(data))
        files.append(tmp_path / name)
    merged = merge.merge(files)
    r = merged["lm-pydoc"]
    assert list(merged) == ["lm-pydoc"] and r["role"] == "evaluation" and r["metric"] == "bpc"
    assert r["ours"] == {"2": 2.5, "5": 1.9, "30": 1.6} and r["plain"] == {"2": 4.0}
    assert r["first_beats"] == {"n-gram": 30.0, "plain PyTorch": 2.0}  # 1.6 < 1.7 first at 30; 2.5 < 4.0 at 2


def test_the_probe_check_reads_a_runs_speed_and_the_recipes_prediction(tmp_path, capsys):
    """bench/real/probe_check.py: a run folder's steps, wall time and median tokens a minute from its
    metrics.jsonl (the loop's own lines); the recipe's probe for a suite file, one line per budget."""
    probe_check = _load("probe_check")
    run = tmp_path / "run"
    run.mkdir()
    lines = [{"step": 10, "split": "train", "tokens_per_s": 100.0, "elapsed_s": 1.0},
             {"step": 20, "split": "train", "tokens_per_s": 300.0, "elapsed_s": 2.0},
             {"step": 20, "split": "valid", "loss": 1.0, "elapsed_s": 9.0},
             {"step": 30, "split": "train", "tokens_per_s": 200.0, "elapsed_s": 10.0}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert probe_check.run_speed(run) == dict(run=str(run), steps=30, wall_s=10, median_tokens_per_minute=12_000,
                                              ruled_passes=None, ruled_dropout=None)
    ruled = {"step": 12, "split": "dropout", "dropout": 0.1, "passes": 31.456, "elapsed_s": 1.1}  # its own rule's
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in [*lines[:1], ruled, *lines[1:]]))
    assert probe_check.run_speed(run) == dict(run=str(run), steps=30, wall_s=10, median_tokens_per_minute=12_000,
                                              ruled_passes=31.46, ruled_dropout=0.1)
    data = tmp_path / "data"
    data.mkdir()
    (data / "toy-train.tsv").write_text("".join(f"{w}\t{' '.join(w.upper())}\n" for w in
                                                ["cat", "dog", "fish", "bird", "mouse", "horse"] * 40))
    rows = probe_check.main([str(data), "--minutes", "1", "10", "--threads", "1"])
    assert [(r["dataset"], r["minutes"]) for r in rows] == [("toy", 1.0), ("toy", 10.0)]
    assert all(r["tokens_per_minute"] > 0 and r["passes"] > 0 for r in rows)
    assert rows[1]["passes"] > rows[0]["passes"]  # 10x the minutes: more passes (two probes: not exactly 10x)
    assert rows[1]["passes"] >= 30 and rows[1]["dropout"] == 0.1  # what the run's own rule is predicted to decide


def test_the_context_majority_backs_off_to_one_neighbour_before_the_letter_alone():
    """bench/real/simple.py: 'a' is read A1 three times and A2 once (before 'b'); in an unseen 'qab' no
    +-2 or +-1 context was trained, but 'ab' was: A2, where the letter alone says A1."""
    simple = _load("simple")
    train = [("ca", "C A1"), ("da", "D A1"), ("ga", "G A1"), ("ab", "A2 B"), ("q", "Q")]
    assert simple.g2p_majority(train, [("qab", "Q A2 B")])["ser"] == 0.0
    assert simple.g2p_majority(train, [("qac", "Q A1 C")])["ser"] == 0.0  # no neighbour known: the letter's majority


def test_the_encoder_tagger_reads_a_polyphone_by_its_neighbour_where_the_majority_cannot(tmp_path):
    """bench/real/tagger.py: 'a' reads A2 right before 'b' and A1 everywhere else (twice as often), so
    the per-character majority gets every phrase with 'ab' wrong; 300 steps of the tagger read both."""
    import random

    rng = random.Random(0)
    letters = "cdefgh"

    def phrase(with_b: bool) -> tuple[str, str]:
        chars = [rng.choice(letters) for _ in range(rng.randint(1, 4))]
        chars.insert(rng.randint(0, len(chars)), "ab" if with_b else "a")
        src = "".join(chars)
        reading = [("A2" if c == "a" and src[i + 1:i + 2] == "b" else "A1" if c == "a" else c.upper())
                   for i, c in enumerate(src)]
        return src, " ".join(reading)

    for split, n in (("train", 600), ("test", 200)):
        rows = [phrase(i % 3 == 0) for i in range(n)]
        (tmp_path / f"toy-{split}.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in rows), encoding="utf-8")
    test = [line.split("\t") for line in (tmp_path / "toy-test.tsv").read_text(encoding="utf-8").splitlines()]
    majority = sum("A2" not in t for _, t in test) / len(test)  # the majority reads every 'a' as A1
    assert 0.6 < majority < 0.75
    result = _load("tagger").cli(["toy", str(tmp_path), "5", "--max-steps", "300", "--dropout", "0",
                                      "--d-model", "64", "--layers", "2"])
    assert result["steps"] == 300 and result["test_n"] == 200
    assert result["test_exact_match"] > 0.95 > majority
