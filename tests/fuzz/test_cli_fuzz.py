"""Fuzzing the CLI in-process with hypothesis: mutated and random .spec files, pass strings,
config.json files and prompts files go through `specir.cli.main.main(argv)` (opt, run, compile,
init, bench).

Every example must end with exit code 0, 1 or 2 (never an internal error, exit 3, a traceback or
an exception escaping main), and must write nothing outside its output folder: the example's
input folder (the current directory of the run) and the checkpoints stay byte for byte as they
were. Deterministic (derandomize, no example database) and bounded: about 20-40 s on 2 cores.
Reproduce a failure with the blob hypothesis prints (@reproduce_failure) or run one test with
`-k` and `--hypothesis-show-statistics`.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.specs import write_spec

FUZZ = settings(derandomize=True, database=None, deadline=None, print_blob=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large, HealthCheck.filter_too_much])

NUMBERS = ["0", "1", "-1", "2", "3", "4", "64", "99", "259", "1024", "4097", str(2**31), str(2**63 - 1), str(2**63),
           str(10**30), "-" + str(10**30), "0.0", "-0.0", "1e-06", "1e309", "-1e309", "nan", "inf", "-inf", "1.5"]
TOKENS = NUMBERS + [
    "pipeline", "model", "import", "(", ")", "{", "}", "[", "]", "=", ",", ":", "->", "<", ">", "step", "graph",
    "return", "weight", "attributes", "%ctx", "%x", "%d", "%lg", "%acc", "@target", "@drafter", "@nope", "context",
    "tokens", "tree", "logits", "accepted", "act<64>", "logits<259>", "mask<tree>", "mask<causal>", "ids",
    "positions", "draft.ngram", "draft.chain", "draft.tree", "verify.chain", "verify.tree", "accept.greedy",
    "accept.sample", "commit", "rms_norm", "attention", "linear", "packed_linear", "rope", "swiglu", "add", "embed",
    "k", "layer", "eps", "heads", "kv_heads", "head_dim", "topk", "budget", "depth", "threshold", "expand", "kv",
    "window", "scale", "group", "theta", "type", "dtype", "source", '"x"', '"compact"', '"dynamic"', '"bf12"',
    '"f16"', '"f64"', '"' + "a" * 300 + '"', '"\\u00e9"', '"\\ud800"', "true", "false", "é", "%é", "\x00", "\x7f",
    "//", "\n", "\t", "bf16[64]", "f32[-1]", "bf12[64, 64]", '"model.norm.weight"',
]
VALUES = NUMBERS + ['"x"', '""', '"compact"', '"dynamic"', '"f16"', '"zoo:nope"', "true", "false", "[]", "[1, 2]",
                   "{}", "{a = 1}", "{theta = 0.0, type = \"default\"}", '"' + "b" * 500 + '"']
PASS_NAMES = ["canonicalize", "tree-verify", "pack-weights", "tree-verfy", "nope", "", "-", "a" * 60]
PASS_OPTIONS = ["budget", "topk", "depth", "expand", "threshold", "format", "skip", "models", "max_bits",
                "max_zeros", "min_weights", "bugdet", ""]
PASS_VALUES = NUMBERS + ["", "static", "dynamic", "bf12", "true", "lots", "{32}", "*", "é", "\"x\"", "a,b", "}"]
CONFIG_KEYS = ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "vocab_size",
               "intermediate_size", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_theta",
               "rope_parameters", "rope_scaling", "tie_word_embeddings", "attention_bias", "mlp_bias", "model_type",
               "eos_token_id", "sliding_window", "use_sliding_window", "max_window_layers", "layer_types",
               "partial_rotary_factor", "unknown_key"]
JSON_VALUES = st.one_of(
    st.integers(-2**70, 2**70), st.sampled_from([0, 1, -2, 2, 4, 64, 259, 2**31, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6), st.sampled_from(["64", "llama", "qwen3"]),
    st.booleans(), st.none(), st.lists(st.integers(-5, 300), max_size=3),
    st.dictionaries(st.sampled_from(["rope_type", "rope_theta", "factor", "type", "x"]),
                    st.one_of(st.integers(-3, 10**6), st.floats(allow_nan=True), st.text(max_size=4)), max_size=3))


# ---------------------------------------------------------------------- the harness

def _snapshot(*folders: Path, skip: Path | None = None) -> dict:
    """(path -> (size, mtime_ns, mode)) of everything under `folders` (not under `skip`)."""
    state = {}
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            if skip is not None and Path(root).resolve() == skip.resolve():
                dirs[:] = []
                continue
            for name in dirs + files:
                path = Path(root, name)
                if skip is not None and path.resolve() == skip.resolve():
                    continue
                st_ = path.lstat()
                state[str(path)] = (st_.st_size, st_.st_mtime_ns, st_.st_mode)
    return state


class Harness:
    """One fresh folder per example: inputs in it, outputs under its `out/`; runs main() there."""

    def __init__(self, root: Path, protected: list[Path]):
        self.root, self.protected, self.count = root, protected, 0
        self.before_protected = _snapshot(*protected)

    def folder(self) -> Path:
        self.count += 1
        work = self.root / f"ex{self.count}"
        work.mkdir()
        return work

    def run(self, work: Path, *argv) -> tuple[int, str, str]:
        from specir.cli.main import main
        out = work / "out"
        before = _snapshot(work, skip=out)
        stdout, stderr = io.StringIO(), io.StringIO()
        cwd = os.getcwd()
        os.chdir(work)
        try:
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                try:
                    code = main([str(a) for a in argv])
                except SystemExit as exc:  # argparse's usage errors
                    code = exc.code if isinstance(exc.code, int) else 2
        finally:
            os.chdir(cwd)
        err = stderr.getvalue()
        assert code in (0, 1, 2), (argv, code, err[-3000:])
        assert "internal error" not in err and "Traceback" not in err, (argv, err[-3000:])
        if code == 2 and "usage:" not in err:
            assert "error:" in err, (argv, err[-3000:])
        assert _snapshot(work, skip=out) == before, f"{argv} wrote outside {out}"
        shutil.rmtree(work, ignore_errors=True)
        return code, stdout.getvalue(), err

    def check_protected(self) -> None:
        assert _snapshot(*self.protected) == self.before_protected, "a checkpoint folder changed"


@pytest.fixture(scope="module")
def bases(pair, tmp_path_factory):
    """Valid pipelines to mutate: n-gram, model chain, tree (after tree-verify), and an unexpanded one."""
    target, drafter = pair
    folder = tmp_path_factory.mktemp("fuzz-bases")
    texts = {
        "ngram": write_spec(folder, "ngram", target).read_text(),
        "chain": write_spec(folder, "chain", target, drafter, k=3).read_text(),
        "tree": write_spec(folder, "tree", target, drafter, k=3, passes="tree-verify{budget=8,topk=2}").read_text(),
        "short": (f'pipeline short {{\n  model @target = import({json.dumps(str(target))})\n'
                  f'  model @drafter = import({json.dumps(str(drafter))})\n  step(%ctx: context) {{\n'
                  "    %d = draft.chain @drafter, %ctx {k = 2}\n    %lg = verify.chain @target, %ctx, %d\n"
                  "    %acc = accept.greedy %d, %lg\n    commit %ctx, %acc\n  }\n}\n"),
    }
    return _Bases(texts)


class _Bases(dict):
    """The base pipelines (a dict) with a short repr, so a failing example prints readably."""

    def __repr__(self) -> str:
        return f"<{len(self)} base pipelines: {', '.join(sorted(self))}>"


@pytest.fixture
def harness(pair, tmp_path):
    h = Harness(tmp_path, list(pair))
    yield h
    h.check_protected()


_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|[%@]?[A-Za-z_][A-Za-z0-9_.]*|->|\s+|.')


def _mutate(data, text: str) -> str:
    """0-3 token-level edits of a valid pipeline: replace, delete or insert a token, change a number,
    or duplicate, swap or drop a line (none: the valid pipeline itself, so success paths run too)."""
    for _ in range(data.draw(st.integers(0, 3), label="mutations")):
        tokens = _TOKEN.findall(text)
        words = [i for i, t in enumerate(tokens) if not t.isspace()]
        numbers = [i for i in words if tokens[i][0].isdigit() or tokens[i][:2].lstrip("-")[:1].isdigit()]
        values = [i for i in words if i >= 2 and tokens[i - 2] == "="]
        kind = data.draw(st.sampled_from(["replace", "delete", "insert", "number", "number", "value", "value",
                                          "duplicate", "swap", "drop"]), label="kind")
        if kind in ("replace", "delete", "insert") and words:
            i = words[data.draw(st.integers(0, len(words) - 1), label="token")]
            if kind == "replace":
                tokens[i] = data.draw(st.sampled_from(TOKENS))
            elif kind == "delete":
                tokens[i] = ""
            else:
                tokens[i] = data.draw(st.sampled_from(TOKENS)) + " " + tokens[i]
            text = "".join(tokens)
        elif kind == "value" and values:
            i = values[data.draw(st.integers(0, len(values) - 1), label="value")]
            tokens[i] = data.draw(st.sampled_from(VALUES))
            text = "".join(tokens)
        elif kind == "number" and numbers:
            i = numbers[data.draw(st.integers(0, len(numbers) - 1), label="number")]
            tokens[i] = data.draw(st.sampled_from(NUMBERS))
            text = "".join(tokens)
        elif kind in ("duplicate", "swap", "drop"):
            lines = text.split("\n")
            a = data.draw(st.integers(0, len(lines) - 1), label="line")
            b = data.draw(st.integers(0, len(lines) - 1), label="other line")
            if kind == "duplicate":
                lines.insert(b, lines[a])
            elif kind == "swap":
                lines[a], lines[b] = lines[b], lines[a]
            else:
                del lines[a]
            text = "\n".join(lines)
    return text


# ---------------------------------------------------------------------- the fuzz tests

@settings(FUZZ, max_examples=150)
@given(data=st.data())
def test_mutated_specs(harness, bases, data):
    base = data.draw(st.sampled_from(sorted(bases)), label="base")
    text = _mutate(data, bases[base])
    work = harness.folder()
    spec = work / "p.spec"
    spec.write_text(text, encoding="utf-8", errors="surrogatepass")
    command = data.draw(st.sampled_from(["opt", "opt", "opt", "opt-o", "run", "compile"]), label="command")
    if command == "opt":
        harness.run(work, "opt", spec)
    elif command == "opt-o":
        (work / "out").mkdir()
        harness.run(work, "opt", spec, "-o", work / "out" / "final.spec")
    elif command == "run":
        harness.run(work, "run", spec, "--target", "cpu", "--prompt-ids", "1,2,3", "--max-new-tokens", 2)
    else:
        harness.run(work, "compile", spec, "--target", "cpu", "-o", work / "out" / "build")


@settings(FUZZ, max_examples=60)
@given(tokens=st.lists(st.sampled_from(TOKENS), max_size=60), raw=st.binary(max_size=40))
def test_token_soups(harness, tokens, raw):
    work = harness.folder()
    spec = work / "soup.spec"
    spec.write_bytes((" ".join(tokens)).encode("utf-8", "surrogatepass") + (raw if len(tokens) % 3 == 0 else b""))
    harness.run(work, "opt", spec)


def _pass_string(data) -> str:
    if data.draw(st.booleans(), label="free text"):
        return data.draw(st.text(alphabet="abcdefgikmnoprstuvwy-_{}=,.0123456789 %é\"*", max_size=40))
    parts = []
    for _ in range(data.draw(st.integers(0, 3))):
        name = data.draw(st.sampled_from(PASS_NAMES))
        opts = [f"{data.draw(st.sampled_from(PASS_OPTIONS))}={data.draw(st.sampled_from(PASS_VALUES))}"
                for _ in range(data.draw(st.integers(0, 3)))]
        parts.append(name + ("{" + ",".join(opts) + "}" if opts or data.draw(st.booleans()) else ""))
    return ",".join(parts)


@settings(FUZZ, max_examples=100)
@given(data=st.data())
def test_pass_strings(harness, bases, data):
    work = harness.folder()
    spec = work / "chain.spec"
    spec.write_text(bases["chain"])
    harness.run(work, "opt", spec, "-p", _pass_string(data))


@settings(FUZZ, max_examples=60)
@given(data=st.data())
def test_config_files(harness, pair, data):
    target = pair[0]
    work = harness.folder()
    folder = work / "ck"
    folder.mkdir()
    for name in ("model.safetensors", "tokenizer.json"):
        (folder / name).symlink_to(target / name)
    config = json.loads((target / "config.json").read_text())
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        key = data.draw(st.sampled_from(CONFIG_KEYS + sorted(config)))
        if data.draw(st.integers(0, 4)) == 0:
            config.pop(key, None)
        else:
            config[key] = data.draw(JSON_VALUES, label=key)
    text = json.dumps(config)
    if data.draw(st.integers(0, 9)) == 0:
        text = text[: data.draw(st.integers(0, len(text)))]  # cut short
    (folder / "config.json").write_text(text)
    if data.draw(st.booleans(), label="via a .spec"):
        spec = work / "p.spec"
        spec.write_text(f'pipeline p {{\n  model @target = import("ck")\n  step(%ctx: context) {{\n'
                        "    %d = draft.ngram %ctx {k = 2}\n    %lg = verify.chain @target, %ctx, %d\n"
                        "    %acc = accept.greedy %d, %lg\n    commit %ctx, %acc\n  }\n}\n")
        harness.run(work, "opt", spec)
    else:
        harness.run(work, "init", "--target-model", folder, "--drafter", "ngram")


_VALID_LINE = st.one_of(st.fixed_dictionaries({"prompt_ids": st.lists(st.integers(0, 258), min_size=1, max_size=12)}),
                        st.fixed_dictionaries({"prompt": st.text(alphabet="def fibonacci(n):", min_size=1, max_size=20)}))
_PROMPT_LINE = st.one_of(
    _VALID_LINE, _VALID_LINE, _VALID_LINE,
    st.fixed_dictionaries({"prompt_ids": st.lists(st.integers(-3, 300), max_size=12)}),
    st.fixed_dictionaries({"prompt_ids": st.one_of(st.text(max_size=3), st.lists(st.floats(), max_size=2),
                                                  st.lists(st.integers(-2**70, 2**70), min_size=1, max_size=2))}),
    st.fixed_dictionaries({"prompt": st.text(max_size=20)}),
    st.fixed_dictionaries({"prompt": st.sampled_from(["def f(", "\ud800x", "", "é" * 5, 5, None, ["a"]])}),
    st.fixed_dictionaries({"prompt": st.just("x"), "prompt_ids": st.just([1, 2])}),
    st.dictionaries(st.sampled_from(["note", "id", "max_new_tokens", "workload"]), st.integers(), max_size=2),
    st.just("not json"), st.just(""), st.just("[1, 2]"), st.just('{"prompt_ids": [1, 2'),
)


@settings(FUZZ, max_examples=30)
@given(lines=st.lists(_PROMPT_LINE, min_size=0, max_size=3), tail=st.binary(max_size=8))
def test_prompts_files(harness, bases, lines, tail):
    work = harness.folder()
    spec = work / "ngram.spec"
    spec.write_text(bases["ngram"])
    prompts = work / "prompts.jsonl"
    body = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n"
    prompts.write_bytes(body.encode("utf-8") + (tail if len(lines) == 3 else b""))
    # bench reads prompts files as check does, and generates in this process (check's guard spawns two)
    harness.run(work, "bench", spec, "--target", "cpu", "--prompts", prompts, "--max-new-tokens", 2, "--limit", 3,
                "--out", work / "out" / "bench")
