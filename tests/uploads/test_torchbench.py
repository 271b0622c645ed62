"""benchmarks/dynamo CSVs (performance, accuracy, ci_expected_accuracy) -> native result rows."""

from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from app.runs.schemas import ResultIn
from app.uploads.base import Hints, Parsed, UploadError, UploadFile
from app.uploads.pytorch_ci import FileNameFacts, read_file_name
from app.uploads.torchbench import parse_torchbench

DATA = Path(__file__).parent.parent / "data" / "uploads" / "torchbench"
RESULTS = TypeAdapter(list[ResultIn])
PERF_HEADER = (
    "dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,"
    "eager_peak_mem,dynamo_peak_mem,calls_captured,unique_graphs,graph_breaks,"
    "unique_graph_breaks,autograd_captures,autograd_compiles,cudagraph_skips"
)
PERF_NAME = "inductor_with_cudagraphs_torchbench_amp_training_cuda_performance.csv"


def parse(name: str, content: str | bytes, hints: Hints | None = None) -> Parsed:
    """Parse, then prove every row is ingestible as the native ResultIn."""
    data = content.encode() if isinstance(content, str) else content
    parsed = parse_torchbench(UploadFile(name, data), hints or Hints())
    RESULTS.validate_python(parsed.results)
    return parsed


def fixture(file: str, as_name: str | None = None, hints: Hints | None = None) -> Parsed:
    return parse(as_name or file, (DATA / file).read_bytes(), hints)


def by_model(parsed: Parsed, model: str) -> dict[str, dict[str, Any]]:
    return {r["metric"]: r for r in parsed.results if r["model"] == model}


def values(parsed: Parsed, model: str) -> dict[str, float | str | None]:
    return {m: r.get("value", r.get("text_value")) for m, r in by_model(parsed, model).items()}


def parse_error(name: str, content: str | bytes, hints: Hints | None = None) -> UploadError:
    data = content.encode() if isinstance(content, str) else content
    with pytest.raises(UploadError) as caught:
        parse_torchbench(UploadFile(name, data), hints or Hints())
    return caught.value


# --- real files ---------------------------------------------------------------------------


def test_ci_perf_baseline_as_a_performance_csv() -> None:
    parsed = fixture("expected_ci_perf_inductor_torchbench.csv", as_name=PERF_NAME)
    assert len(parsed.results) == 16 * 4
    assert values(parsed, "BERT_pytorch") == {
        "speedup": 2.6028,
        "abs_latency": 22.2879,
        "compilation_latency": 41.0046,
        "compression_ratio": 1.1965,
    }
    (row,) = [r for r in parsed.results if r["model"] == "yolov3" and r["metric"] == "speedup"]
    assert row == {
        "suite": "torchbench",
        "model": "yolov3",
        "mode": "training",
        "precision": "amp",
        "config": "cudagraphs",
        "batch_size": 16,
        "metric": "speedup",
        "value": 1.26,
    }
    assert by_model(parsed, "dlrm")["speedup"]["batch_size"] == 1024
    assert parsed.machine == {"device": "cuda"}


def test_full_column_performance_row_from_its_file_name() -> None:
    name = "inductor_cpp_wrapper_torchbench_amp_inference_cpu_performance.csv"
    parsed = fixture("cpu_cppwrapper_BERT_pytorch_performance_fullcols.csv", as_name=name)
    assert values(parsed, "BERT_pytorch") == {
        "speedup": 2.014039,
        "abs_latency": 58.90128,
        "compilation_latency": 38.538333,
        "compression_ratio": 0.923878,
        "eager_peak_mem": 250.866893,
        "dynamo_peak_mem": 271.536947,
        "calls_captured": 545,
        "unique_graphs": 1,
        "graph_breaks": 0,
        "unique_graph_breaks": 0,
        "autograd_captures": 0,
        "autograd_compiles": 0,
        "cudagraph_skips": 1,
    }
    rows = RESULTS.validate_python(parsed.results)
    assert {(r.config, r.precision, r.mode, r.suite, r.batch_size) for r in rows} == {
        ("cpp_wrapper", "amp", "inference", "torchbench", 2)
    }
    units = {r.metric: r.resolved_unit for r in rows}
    assert (units["abs_latency"], units["compilation_latency"], units["eager_peak_mem"]) == (
        "ms",
        "s",
        "GB",
    )
    assert (units["calls_captured"], units["cudagraph_skips"], units["speedup"]) == (
        "count",
        "count",
        "x",
    )
    assert {r.status for r in rows} == {"ok"}
    assert parsed.machine == {"device": "cpu"}


def test_hints_stand_in_for_a_name_that_says_nothing() -> None:
    hints = Hints(
        suite="torchbench", config="inductor_cpp_wrapper", precision="amp", mode="inference"
    )
    parsed = fixture("cpu_cppwrapper_BERT_pytorch_performance_fullcols.csv", hints=hints)
    named = fixture(
        "cpu_cppwrapper_BERT_pytorch_performance_fullcols.csv",
        as_name="inductor_cpp_wrapper_torchbench_amp_inference_cpu_performance.csv",
    )
    assert parsed.results == named.results
    assert parsed.machine == {"device": "cpu"}  # from the dev column


def test_expected_accuracy_with_oom_and_infra_error() -> None:
    parsed = fixture("inductor_huggingface_training.csv", hints=Hints(precision="amp"))
    assert len(parsed.results) == 44 * 2
    assert values(parsed, "BartForConditionalGeneration") == {"accuracy": "OOM", "graph_breaks": 4}
    assert values(parsed, "M2M100ForConditionalGeneration")["accuracy"] == "infra_error"
    assert values(parsed, "DebertaV2ForQuestionAnswering")["accuracy"] == "eager_1st_run_OOM"
    assert values(parsed, "DebertaV2ForMaskedLM")["accuracy"] == "pass_due_to_skip"
    assert values(parsed, "AllenaiLongformerBase") == {"accuracy": "pass", "graph_breaks": 134}
    accuracy = by_model(parsed, "BartForConditionalGeneration")["accuracy"]
    assert accuracy == {
        "suite": "huggingface",
        "model": "BartForConditionalGeneration",
        "mode": "training",
        "precision": "amp",
        "config": "cudagraphs",
        "batch_size": None,
        "metric": "accuracy",
        "text_value": "OOM",
    }
    assert parsed.machine == {}  # the name says nothing about the device


def test_expected_accuracy_rocm_dynamic_with_blank_lines() -> None:
    parsed = fixture("rocm__dynamic_inductor_timm_training.csv", hints=Hints(precision="amp"))
    models = {r["model"] for r in parsed.results}
    assert len(models) == 55
    assert values(parsed, "crossvit_9_240") == {"accuracy": "fail_accuracy", "graph_breaks": 7}
    assert values(parsed, "cait_m36_384")["accuracy"] == "eager_fail_to_run"
    assert {(r["suite"], r["config"], r["mode"]) for r in parsed.results} == {
        ("timm_models", "dynamic", "training")
    }
    assert parsed.machine == {"device": "rocm"}


def test_expected_accuracy_rocm_folder_and_inductor_alias() -> None:
    content = (DATA / "rocm__inductor_torchbench_inference.csv").read_bytes()
    parsed = parse(
        "ci_expected_accuracy/rocm/inductor_torchbench_inference.csv",
        content,
        Hints(precision="bfloat16"),
    )
    assert values(parsed, "torchrec_dlrm") == {"accuracy": "eager_fail_to_run", "graph_breaks": 0}
    assert values(parsed, "BERT_pytorch") == {"accuracy": "pass", "graph_breaks": 0}
    assert {(r["config"], r["precision"]) for r in parsed.results} == {("cudagraphs", "bf16")}
    assert parsed.machine == {"device": "rocm"}
    assert (
        parse("rocm__inductor_torchbench_inference.csv", content, Hints(precision="bf16")).results
        == parsed.results
    )


def test_a_different_csv_format_is_refused_at_its_header() -> None:
    error = parse_error(
        PERF_NAME, (DATA / "expected_ci_speedup_inductor_torchbench_cpu.csv").read_bytes()
    )
    # lines 1-2 are #-comments; line 3 is read as the header and has no name column
    assert (error.line, error.field) == (3, "name")


# --- failures, padding, placeholders --------------------------------------------------------


def test_speedup_zero_is_a_failure_not_a_zero() -> None:
    content = "\n".join(
        [
            PERF_HEADER,
            "cuda,hf_T5,0,0.000000,0.000000,0,0,0,0,0,0,0,0,0,0,0",
            "cuda,resnet50,32,1.143700,23.297900,27.039200,0.882400,3.1,3.5,1,1,0,0,0,0,0",
            "cuda,yolov3,16,0.000000,54.235000,42.471100,1.010800,2.0,2.0,3,1,0,0,0,0,0",
        ]
    )
    parsed = parse(PERF_NAME, content)
    hf = by_model(parsed, "hf_T5")
    assert set(hf) == {"speedup", "abs_latency"}  # the other cells are output_csv's padding
    assert hf["speedup"]["status"] == "failed"
    assert hf["speedup"]["reason"].startswith("speedup 0 and abs_latency 0: the model failed")
    assert hf["speedup"]["batch_size"] is None  # 0 is the placeholder, not a batch size
    assert [r.get("value") for r in hf.values()] == [None, None]
    assert len(by_model(parsed, "resnet50")) == 13
    assert by_model(parsed, "resnet50")["eager_peak_mem"]["value"] == 3.1
    yolo = by_model(parsed, "yolov3")
    assert {m: r.get("status") for m, r in yolo.items()} == {
        "speedup": "failed",
        "abs_latency": "failed",
    }
    assert yolo["speedup"]["reason"].startswith("speedup 0:")
    assert yolo["speedup"]["batch_size"] == 16
    stored = [r for r in parsed.results if r.get("value") == 0]
    assert all(r["metric"] not in ("speedup", "abs_latency") for r in stored)


def test_accuracy_csv_exception_row_keeps_only_its_status() -> None:
    content = "\n".join(
        [
            "dev,name,batch_size,accuracy,calls_captured,unique_graphs,graph_breaks",
            "cuda,hf_T5,0,eager_fail_to_run,0,0,0",
            "cuda,BERT_pytorch,16,pass,545,1,0",
            "cuda,hf_Bert,8,fail_accuracy,12,2,1",
        ]
    )
    name = "inductor_no_cudagraphs_huggingface_bfloat16_inference_cuda_accuracy.csv"
    parsed = parse(name, content)
    assert values(parsed, "hf_T5") == {"accuracy": "eager_fail_to_run"}
    assert by_model(parsed, "hf_T5")["accuracy"]["batch_size"] is None
    assert values(parsed, "BERT_pytorch") == {
        "accuracy": "pass",
        "calls_captured": 545,
        "unique_graphs": 1,
        "graph_breaks": 0,
    }
    assert values(parsed, "hf_Bert")["accuracy"] == "fail_accuracy"
    assert {r.get("status", "ok") for r in parsed.results} == {"ok"}
    assert {(r["config"], r["precision"]) for r in parsed.results} == {("default", "bf16")}


def test_blank_cells_comments_crlf_and_tag() -> None:
    content = (
        "# produced by hand\r\n"
        "dev,name,batch_size,tag,speedup,abs_latency,compilation_latency\r\n"
        "\r\n"
        "cuda,alexnet,128,nightly,1.1919,,6.5561\r\n"
        "# alexnet again, commented out\r\n"
        "cuda,dcgan,32,nightly,0.9276,2.2476\r\n"
    )
    parsed = parse(PERF_NAME, content)
    assert values(parsed, "alexnet") == {"speedup": 1.1919, "compilation_latency": 6.5561}
    assert values(parsed, "dcgan") == {"speedup": 0.9276, "abs_latency": 2.2476}
    assert {str(r["params"]) for r in parsed.results} == {"{'tag': 'nightly'}"}


def test_unknown_and_baseline_columns() -> None:
    content = "\n".join(
        [
            "dev,name,batch_size,speedup,abs_latency,baseline,speedup_vs_baseline,"
            "cache_lookup_latency",
            "cuda,alexnet,128,1.2,8.2,1.1,1.090909,0.013",
            "cuda,dcgan,32,0.93,2.2,0.0,0.0,0.02",
        ]
    )
    parsed = parse(PERF_NAME, content)
    rows = {(r.model, r.metric): r for r in RESULTS.validate_python(parsed.results)}
    lookup = rows[("alexnet", "cache_lookup_latency")]
    assert (lookup.value, lookup.resolved_unit, lookup.resolved_direction) == (0.013, "", False)
    ratio = rows[("alexnet", "speedup_vs_baseline")]
    assert (ratio.value, ratio.resolved_unit, ratio.resolved_direction) == (1.090909, "x", True)
    # --baseline without this model: common.py writes 0.0, 0.0, which is no measurement
    assert ("dcgan", "baseline") not in rows
    assert ("dcgan", "speedup_vs_baseline") not in rows


# --- file names -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "inductor_no_cudagraphs_torchbench_amp_training_cuda_performance.csv",
            ("torchbench", "default", "amp", "training", {"device": "cuda"}),
        ),
        (
            "test/test-reports/inductor_with_cudagraphs_timm_models_bfloat16_inference"
            "_cuda_h100_accuracy.csv",
            ("timm_models", "cudagraphs", "bf16", "inference", {"device": "cuda", "arch": "h100"}),
        ),
        (
            "inductor_dynamic_huggingface_float32_inference_cpu_x86_zen_performance.csv",
            ("huggingface", "dynamic", "fp32", "inference", {"device": "cpu", "arch": "x86_zen"}),
        ),
        (
            "inductor_aot_inductor_torchbench_float16_inference_rocm_performance.csv",
            ("torchbench", "aot_inductor", "fp16", "inference", {"device": "rocm"}),
        ),
        (
            "inductor_with_cudagraphs_freezing_autotune_torchbench_bfloat16_inference_cuda_b200"
            "_performance.csv",
            (
                "torchbench",
                "inductor_with_cudagraphs_freezing_autotune",
                "bf16",
                "inference",
                {"device": "cuda", "arch": "b200"},
            ),
        ),
        (
            "inductor_batch_invariant_accuracy_torchbench_bfloat16_inference_xpu_accuracy.csv",
            (
                "torchbench",
                "inductor_batch_invariant_accuracy",
                "bf16",
                "inference",
                {"device": "xpu"},
            ),
        ),
        (
            "cpu_inductor_amp_freezing_torchbench_inference.csv",
            ("torchbench", "freezing", "amp", "inference", {"device": "cpu"}),
        ),
        (
            "cpu_inductor_huggingface_amp_inference.csv",  # plain inductor on CPU: no CUDA graphs
            ("huggingface", "default", "amp", "inference", {"device": "cpu"}),
        ),
        (
            "inductor_timm_dynamic_training_amp.csv",
            ("timm_models", "dynamic", "amp", "training", {}),
        ),
        (
            "ci_expected_accuracy/cu124/aot_inductor_torchbench_inference_bfloat16.csv",
            ("torchbench", "aot_inductor", "bf16", "inference", {"device": "cuda"}),
        ),
        (
            "dynamic_aot_eager_huggingface_training_amp.csv",
            ("huggingface", "dynamic_aot_eager", "amp", "training", {}),
        ),
    ],
)
def test_file_name_grammar_and_aliases(name: str, expected: tuple[Any, ...]) -> None:
    parsed = parse(name, "dev,name,batch_size,speedup\n,alexnet,4,1.5\n")
    (row,) = parsed.results
    assert (row["suite"], row["config"], row["precision"], row["mode"], parsed.machine) == expected


def test_read_file_name_keeps_pytorch_spelling() -> None:
    assert read_file_name(
        "C:\\reports\\Inductor_No_Cudagraphs_torchbench_amp_training_cuda_performance.csv"
    ) == FileNameFacts("torchbench", "inductor_no_cudagraphs", "amp", "training", "cuda")
    assert read_file_name("rocm__dynamic_inductor_timm_training.csv") == FileNameFacts(
        suite="timm_models", backend="dynamic_inductor", mode="training", device="rocm"
    )
    assert read_file_name("results.csv") == FileNameFacts()
    # a compilation-metrics companion file is not a results file: nothing is guessed
    assert (
        read_file_name(
            "inductor_no_cudagraphs_torchbench_amp_training_cuda_performance_compilation_metrics.csv"
        )
        == FileNameFacts()
    )


def test_hints_win_over_the_file_name() -> None:
    hints = Hints(
        config="max_autotune", precision="bfloat16", mode="inference", suite="timm", device="rocm"
    )
    parsed = parse(
        "inductor_no_cudagraphs_torchbench_amp_training_cuda_h100_performance.csv",
        "dev,name,batch_size,speedup\ncuda,alexnet,4,1.5\n",
        hints,
    )
    (row,) = parsed.results
    assert (row["suite"], row["config"], row["precision"], row["mode"]) == (
        "timm_models",
        "max_autotune",
        "bf16",
        "inference",
    )
    assert parsed.machine == {"device": "rocm"}  # the dev column's "cuda" is what ROCm reports


# --- errors -------------------------------------------------------------------------------------


def test_missing_run_facts_are_named() -> None:
    error = parse_error("inductor_torchbench_inference.csv", "name,accuracy\nalexnet,pass\n")
    assert error.field == "precision"
    assert error.message == "cannot tell the precision from the file name; give precision="
    error = parse_error("results.csv", "name,accuracy\nalexnet,pass\n", Hints(mode="training"))
    assert error.message == (
        "cannot tell the suite, config, precision from the file name; "
        "give suite=, config=, precision="
    )


@pytest.mark.parametrize(
    ("content", "line", "field", "message"),
    [
        (f"{PERF_HEADER}\n\n\ncuda,alexnet,4,1.5,abc\n", 4, "abs_latency", "not a number: 'abc'"),
        ("dev,name,batch_size,speedup\ncuda,alexnet,4,nan\n", 2, "speedup", "not a number: 'nan'"),
        ("dev,name,batch_size,speedup\ncuda,alexnet,4,1_5\n", 2, "speedup", "not a number: '1_5'"),
        ("dev,name,batch_size,speedup\ncuda,,4,1.5\n", 2, "name", "the model name is empty"),
        (
            "dev,name,batch_size,speedup\ncuda,a,4,1.5\ncuda,b,-1,1.5\n",
            3,
            "batch_size",
            "batch_size must be a whole number >= 0, not '-1'",
        ),
        ("dev,model,speedup\ncuda,alexnet,1.5\n", 1, "name", "the header has no 'name' column"),
        ("dev,name,speedup,speedup\ncuda,a,1,1\n", 1, "speedup", "the column appears twice"),
        (
            "dev,name,speedup\ncuda,a,1.5,2,3\n",
            2,
            None,
            "5 cells, but the header has 3 columns",
        ),
        ("\n\n", None, None, "the file has no header line (one with a 'name' column)"),
    ],
)
def test_bad_rows_name_line_and_field(
    content: str, line: int | None, field: str | None, message: str
) -> None:
    error = parse_error(PERF_NAME, content)
    assert (error.line, error.field, error.message) == (line, field, message)
    assert error.file == PERF_NAME


def test_error_line_counts_blank_lines() -> None:
    text = (DATA / "rocm__dynamic_inductor_timm_training.csv").read_text()
    broken = text.replace("crossvit_9_240,fail_accuracy,7", "crossvit_9_240,fail_accuracy,seven")
    error = parse_error("rocm__dynamic_inductor_timm_training.csv", broken, Hints(precision="amp"))
    assert (error.line, error.field) == (37, "graph_breaks")
    assert text.splitlines()[36] == "crossvit_9_240,fail_accuracy,7"


def test_unreadable_encodings_are_refused() -> None:
    latin1 = "dev,name,speedup\ncuda,caf\xe9,1.5\n".encode("latin-1")
    error = parse_error(PERF_NAME, latin1)
    assert (error.line, error.message) == (2, "not UTF-8 text (byte 0xe9 at offset 25)")
    error = parse_error(PERF_NAME, "dev,name,speedup\n".encode("utf-16"))
    assert error.message == "the file is UTF-16; save it as UTF-8"
    bom = "\ufeffdev,name,batch_size,speedup\ncuda,alexnet,4,1.5\n".encode()
    assert parse(PERF_NAME, bom).results[0]["value"] == 1.5


@pytest.mark.parametrize(
    ("hints", "field"),
    [
        (Hints(precision="fp64"), "precision"),
        (Hints(mode="eval"), "mode"),
        (Hints(device="tpu"), "device"),
        (Hints(config="bad config"), "config"),
    ],
)
def test_bad_hints_are_refused(hints: Hints, field: str) -> None:
    assert parse_error(PERF_NAME, "name,speedup\nalexnet,1.5\n", hints).field == field


def test_rows_that_disagree_on_the_device_need_a_hint() -> None:
    content = "dev,name,speedup\ncuda,a,1.5\ncpu,b,1.2\n"
    hints = Hints(suite="torchbench", config="default", precision="amp", mode="training")
    error = parse_error("mixed.csv", content, hints)
    assert (error.field, error.message) == (
        "dev",
        "the rows name several devices (cpu, cuda); give device=",
    )
    assert parse("mixed.csv", content, Hints(**{**hints.__dict__, "device": "cuda"})).machine == {
        "device": "cuda"
    }
