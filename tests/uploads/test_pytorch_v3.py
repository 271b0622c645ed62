"""PyTorch OSS benchmark-database (v3) records -> native rows, machine, environment and run."""

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from app.runs.schemas import EnvironmentIn, MachineIn, ResultIn, RunIn
from app.uploads.base import Hints, Parsed, UploadError, UploadFile
from app.uploads.pytorch_v3 import direction_from_name, parse_pytorch_v3
from app.uploads.torchbench import parse_torchbench

DATA = Path(__file__).parent.parent / "data" / "uploads" / "pytorch_v3"
ROWS = TypeAdapter(list[ResultIn])

# every copied fixture and how many records (= result rows) it holds
FIXTURES = {
    "testinfra_fixture__add_loop_eager.json": 1,
    "testinfra_fixture__add_loop_inductor_dynamic_gpu.json": 1,
    "testinfra_fixture__do_not_overwrite_runners_info.json": 1,
    "testinfra_fixture__json-each-row.json": 3,
    "pytorch__transformer_test_dashboard.json": 4,
    "pytorch__pr_time_benchmarks_add_loop_inductor_gpu.json": 1,
    "constructed__torchinductor_perf_records.jsonl": 4,
    "constructed__torchinductor_accuracy_record.jsonl": 2,
    "constructed__full_stored_row_example.json": 1,
    "constructed__full_stored_row_example_rocm.json": 1,
}


def parse(name: str, hints: Hints | None = None) -> Parsed:
    return parse_pytorch_v3(UploadFile(name, (DATA / name).read_bytes()), hints or Hints())


def parse_text(text: str, hints: Hints | None = None) -> Parsed:
    return parse_pytorch_v3(UploadFile("up.json", text.encode()), hints or Hints())


def record(**changes: Any) -> dict[str, Any]:
    """A minimal valid record; keyword arguments replace its sections."""
    base: dict[str, Any] = {
        "benchmark": {"name": "micro", "mode": "inference", "dtype": "float32"},
        "model": {"name": "add", "backend": "eager"},
        "metric": {"name": "latency", "benchmark_values": [1.0, 2.0, 3.0]},
    }
    return base | changes


def upload_error(text: str, hints: Hints | None = None) -> UploadError:
    with pytest.raises(UploadError) as caught:
        parse_text(text, hints)
    return caught.value


def ingestible(parsed: Parsed) -> RunIn:
    """The run payload an upload of this file would make (machine name/device filled in)."""
    machine = {"name": "test-machine", "device": "cpu"} | parsed.machine
    payload = {"key": "k", "machine": machine, "environment": parsed.environment}
    return RunIn.model_validate(payload | parsed.run | {"results": parsed.results})


@pytest.mark.parametrize(("name", "count"), FIXTURES.items())
def test_every_fixture_parses_into_ingestible_rows(name: str, count: int) -> None:
    parsed = parse(name)
    assert len(parsed.results) == count
    assert len(ROWS.validate_python(parsed.results)) == count
    MachineIn.model_validate({"name": "m", "device": "cpu"} | parsed.machine)
    EnvironmentIn.model_validate(parsed.environment)
    assert len(ingestible(parsed).results) == count


def test_fixture_directory_is_covered() -> None:
    assert {p.name for p in DATA.iterdir() if p.suffix != ".md"} == set(FIXTURES)


def test_list_record_maps_every_field() -> None:
    (row,) = parse("testinfra_fixture__add_loop_eager.json").results
    assert row == {
        "suite": "pr_time_benchmarks",
        "model": "add_loop_eager",
        "mode": "inference",
        "precision": "fp32",
        "config": "eager",
        "metric": "compile_time_instruction_count",
        "value": 3086359081.0,
        "samples": [3086359081.0],
        "extra": {
            "benchmark": {
                "name": "pr_time_benchmarks",
                "extra_info": {
                    "is_dynamic": False,
                    "device": "cpu",
                    "description": "a loop over 100 add node",
                },
            },
            "model": {"type": "add_loop", "backend": "eager"},
        },
    }
    (result,) = ROWS.validate_python([row])
    assert (result.resolved_unit, result.resolved_direction) == ("instructions", False)


def test_single_object_with_its_runner() -> None:
    parsed = parse("testinfra_fixture__do_not_overwrite_runners_info.json")
    (row,) = parsed.results
    assert (row["suite"], row["model"], row["config"], row["mode"]) == (
        "ExecuTorch",
        "edsr",
        "xnnpack_q8",
        "inference",
    )
    # the unit comes from the "(mb)" suffix; MB says lower is better
    assert (row["metric"], row["unit"], row["value"]) == (
        "peak_inference_mem_usage(mb)",
        "MB",
        333.2014794921875,
    )
    assert "higher_is_better" not in row
    assert row["params"] == {"method": "forward"}
    assert row["extra"]["metric"] == {"target_value": 0}
    assert "device_arn" in row["extra"]["benchmark"]["extra_info"]["benchmark_config"]
    # a phone is no cuda/rocm/cpu machine: its runner is kept, the upload names the device
    assert parsed.machine == {
        "extra": {
            "name": "Apple iPhone 15",
            "type": "iOS 18.0",
            "avail_mem_in_gb": 0,
            "total_mem_in_gb": 0,
        }
    }


def test_json_each_row_mixes_object_lines_and_list_lines() -> None:
    parsed = parse("testinfra_fixture__json-each-row.json")
    assert [(r["model"], r["config"], r["value"]) for r in parsed.results] == [
        ("add_loop_eager", "eager", 3086359081.0),
        ("add_loop_eager_dynamic", "eager", 5712213247.0),
        ("add_loop_inductor_dynamic_gpu", "cudagraphs", 40859830085.0),
    ]
    assert parsed.results[1]["extra"]["benchmark"]["extra_info"]["is_dynamic"] is True
    # records on cpu and on cuda: the machine is the one with the GPU
    assert parsed.machine == {"device": "cuda"}


def test_torchinductor_records_land_in_the_torchbench_series() -> None:
    rows = parse("constructed__torchinductor_perf_records.jsonl").results
    for row in rows:
        assert (row["suite"], row["model"], row["mode"], row["precision"]) == (
            "torchbench",
            "BERT_pytorch",
            "training",
            "amp",
        )
        # from the output file inductor_with_cudagraphs_torchbench_..., not backend "inductor"
        assert (row["config"], row["batch_size"]) == ("cudagraphs", 16)
        assert "batch_size" not in row["extra"]["benchmark"]["extra_info"]
    results = ROWS.validate_python(rows)
    assert {r.metric: (r.value, r.resolved_unit) for r in results} == {
        "speedup": (2.6028, "x"),
        "abs_latency": (22.2879, "ms"),
        "compilation_latency": (41.0046, "s"),
        "compression_ratio": (1.1965, "x"),
    }


def test_torchinductor_records_and_their_csv_share_series() -> None:
    """The same benchmarks/dynamo row as v3 records and as its CSV: the same benchmarks."""
    csv = (
        b"dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio\n"
        b"cuda,BERT_pytorch,16,2.6028,22.2879,41.0046,1.1965\n"
    )
    name = "test/test-reports/inductor_with_cudagraphs_torchbench_amp_training_cuda_performance.csv"
    from_csv = parse_torchbench(UploadFile(name, csv), Hints()).results
    from_v3 = parse("constructed__torchinductor_perf_records.jsonl").results
    identity = ("suite", "model", "mode", "precision", "config", "batch_size", "params", "metric")
    assert [[r.get(k) for k in (*identity, "value")] for r in from_v3] == [
        [r.get(k) for k in (*identity, "value")] for r in from_csv
    ]


def dynamo_record(metric: dict[str, Any], device: str = "cuda") -> dict[str, Any]:
    output = f"inductor_timm_models_float16_inference_{device}_performance.csv"
    return {
        "benchmark": {
            "name": "TorchInductor",
            "mode": "inference",
            "dtype": "float16",
            "extra_info": {"device": device, "batch_size": 8, "output": output},
        },
        "model": {
            "name": "resnet50",
            "type": "OSS model",
            "backend": "inductor",
            "origins": ["timm_models"],
        },
        "metric": metric,
    }


def test_torchinductor_zero_speedup_is_a_failed_model() -> None:
    metrics = [
        {"name": "speedup", "benchmark_values": [0.0]},
        {"name": "abs_latency", "benchmark_values": [0.0]},
        {"name": "compilation_latency", "benchmark_values": [0.0]},  # 0 is a value here
        {"name": "cold_start_latency", "benchmark_values": [3.5]},  # not well known: a cost
    ]
    rows = parse_text("\n".join(json.dumps(dynamo_record(m)) for m in metrics)).results
    assert [(r.get("status", "ok"), r.get("value")) for r in rows] == [
        ("failed", None),
        ("failed", None),
        ("ok", 0.0),
        ("ok", 3.5),
    ]
    assert rows[0]["reason"].startswith("speedup 0: the model failed to run")
    assert (rows[3]["unit"], rows[3]["higher_is_better"]) == ("", False)
    assert {(r["suite"], r["config"], r["precision"]) for r in rows} == {
        ("timm_models", "cudagraphs", "fp16")
    }
    ROWS.validate_python(rows)


@pytest.mark.parametrize(
    ("rec", "config"),
    [
        (dynamo_record({"name": "speedup", "benchmark_values": [1.5]}, device="cpu"), "default"),
        (
            record(
                benchmark={"name": "b", "extra_info": {"device": "cpu"}},
                model={"name": "m", "backend": "inductor"},
            ),
            "default",
        ),
        (
            record(
                benchmark={"name": "b", "extra_info": {"device": "cuda"}},
                model={"name": "m", "backend": "inductor"},
            ),
            "cudagraphs",
        ),
        (record(model={"name": "m", "backend": "dynamic_inductor"}), "dynamic"),
        (record(model={"name": "m", "backend": "aot_eager"}), "aot_eager"),
        (record(model={"name": "m"}), "eager"),
    ],
)
def test_backend_to_config(rec: dict[str, Any], config: str) -> None:
    (row,) = parse_text(json.dumps(rec)).results
    assert row["config"] == config


def test_accuracy_strings_become_text_values() -> None:
    accuracy, graph_breaks = parse("constructed__torchinductor_accuracy_record.jsonl").results
    assert accuracy["metric"] == "accuracy"
    assert accuracy["text_value"] == "pass"
    assert not {"value", "samples"} & set(accuracy)
    assert accuracy.get("status", "ok") == "ok"
    assert "metric" not in accuracy["extra"]  # extra_info.benchmark_values is the text value
    assert (graph_breaks["metric"], graph_breaks["value"]) == ("graph_breaks", 0.0)
    assert accuracy["config"] == graph_breaks["config"] == "cudagraphs"


def test_accuracy_failure_text_is_kept_as_is() -> None:
    text = json.dumps(
        record(metric={"name": "accuracy", "extra_info": {"benchmark_values": ["fail_accuracy"]}})
    )
    (row,) = parse_text(text).results
    assert (row["text_value"], row.get("status", "ok")) == ("fail_accuracy", "ok")


@pytest.mark.parametrize(
    ("name", "machine"),
    [
        (
            "constructed__full_stored_row_example.json",
            {
                "device": "cuda",
                "arch": "NVIDIA H100 80GB HBM3",
                "cpu": "x86_64",
                "cpu_count": 26,
                "host_memory_gb": 540.1,  # 503 GiB
                "gpu_count": 1,
                "gpu_memory_gb": 84.8,  # 79 GiB on 1 GPU
                "hostname": "example-host",
                "extra": {"avail_mem_in_gb": 503, "avail_gpu_mem_in_gb": 79},
            },
        ),
        (
            "constructed__full_stored_row_example_rocm.json",
            {
                "device": "rocm",
                "arch": "AMD Instinct MI325X",
                "cpu": "x86_64",
                "cpu_count": 128,
                "host_memory_gb": 2147.5,  # 2000 GiB
                "gpu_count": 8,
                "gpu_memory_gb": 274.9,  # 2048 GiB over 8 GPUs: 256 GiB each
                "hostname": "example-rocm-host",
                "extra": {"avail_mem_in_gb": 2000, "avail_gpu_mem_in_gb": 2048},
            },
        ),
    ],
)
def test_stored_row_fills_machine_and_run(name: str, machine: dict[str, Any]) -> None:
    parsed = parse(name)
    assert parsed.machine == machine
    assert parsed.environment == {}  # "dependencies": {}
    job = "inductor-perf-nightly-rocm" if "rocm" in name else "inductor-perf-nightly-h100"
    assert parsed.run == {
        "commit": "0" * 40,
        "branch": "main",
        "started_at": "2025-01-01T00:00:00Z",
        "url": "https://github.com/pytorch/pytorch/actions/runs/1/job/1",
        "extra": {
            "repo": "pytorch/pytorch",
            "name": job,
            "workflow_id": 1,
            "job_id": 1,
            "run_attempt": 1,
            "schema_version": "v3",
            "timestamp": 1735689600,
        },
    }
    (row,) = parsed.results
    assert set(row["extra"]) == {"benchmark", "model"}  # the metadata is the run's, not the row's
    assert ingestible(parsed).started_at is not None


def test_attention_records_keep_their_units_and_shapes() -> None:
    rows = parse("pytorch__transformer_test_dashboard.json").results
    assert {r["metric"]: (r["unit"], r.get("higher_is_better")) for r in rows} == {
        "forward_latency": ("us", None),  # time: lower is better by its unit
        "forward_memory_bandwidth": ("TB/s", None),
        "forward_tflops": ("TFLOPS/s", None),
        "attention_sparsity": ("%", True),  # "%" says no direction; the name does
    }
    for row in rows:
        assert (row["suite"], row["model"], row["precision"], row["config"]) == (
            "PyTorch attention benchmark",
            "causal_compiled",
            "bf16",
            "max_autotune",
        )
        assert row["params"]["shape"] == "(1, 16, 128, 16, 128, 64)"
        assert row["extra"]["metric"] == {"unit": row["unit"], "target_value": None}
    directions = {r.metric: r.resolved_direction for r in ROWS.validate_python(rows)}
    assert directions == {
        "forward_latency": False,
        "forward_memory_bandwidth": True,
        "forward_tflops": True,
        "attention_sparsity": True,
    }


def test_empty_mode_and_missing_dtype_take_defaults() -> None:
    (row,) = parse("pytorch__pr_time_benchmarks_add_loop_inductor_gpu.json").results
    assert (row["mode"], row["precision"], row["config"]) == ("inference", "fp32", "cudagraphs")
    assert row["value"] == 22943732017.0


def test_hints_win() -> None:
    hints = Hints(
        suite="dynamo",
        config="inductor_no_cudagraphs",
        precision="bfloat16",
        mode="train",
        device="rocm",
    )
    parsed = parse("constructed__full_stored_row_example.json", hints)
    (row,) = parsed.results
    assert (row["suite"], row["config"], row["precision"], row["mode"]) == (
        "dynamo",
        "default",
        "bf16",
        "training",
    )
    assert parsed.machine["device"] == "rocm"


@pytest.mark.parametrize(
    ("benchmark", "expected"),
    [
        ({"name": "b", "mode": "train", "dtype": "torch.bfloat16"}, ("training", "bf16")),
        ({"name": "b", "mode": "eval", "dtype": "half"}, ("inference", "fp16")),
        ({"name": "b", "mode": "Training", "dtype": "FLOAT32"}, ("training", "fp32")),
        ({"name": "b"}, ("inference", "fp32")),
    ],
)
def test_mode_and_dtype_spellings(benchmark: dict[str, Any], expected: tuple[str, str]) -> None:
    (row,) = parse_text(json.dumps(record(benchmark=benchmark))).results
    assert (row["mode"], row["precision"]) == expected


def test_value_is_the_median_and_every_sample_is_kept() -> None:
    text = json.dumps(record(metric={"name": "latency", "benchmark_values": [3, 1, 10, 2]}))
    (row,) = parse_text(text).results
    assert (row["value"], row["samples"]) == (2.5, [3.0, 1.0, 10.0, 2.0])


def test_record_without_values_is_a_failed_row() -> None:
    (row,) = parse_text(
        json.dumps(record(metric={"name": "latency", "benchmark_values": []}))
    ).results
    assert (row["status"], row["reason"]) == ("failed", "the record has no benchmark values")
    assert "value" not in row
    ROWS.validate_python([row])


def test_identifying_extra_info_goes_to_params_the_rest_to_extra() -> None:
    infos = [{"shape": [8, 128], "device": "cuda", "output": f"run{i}/x.csv"} for i in (1, 2)]
    infos[1]["shape"] = [16, 128]
    text = "\n".join(json.dumps(record(benchmark={"name": "b", "extra_info": i})) for i in infos)
    rows = parse_text(text).results
    assert [r["params"] for r in rows] == [{"shape": [8, 128]}, {"shape": [16, 128]}]
    assert rows[0]["extra"]["benchmark"]["extra_info"] == {"device": "cuda", "output": "run1/x.csv"}


def test_unknown_metric_units_and_directions() -> None:
    metrics = [
        {"name": "tokens_per_sec", "benchmark_values": [100]},
        {"name": "avg_inference_latency(ms)", "benchmark_values": [5]},
        {"name": "load", "benchmark_values": [5], "extra_info": {"unit": "sec"}},
        {"name": "status_code", "extra_info": {"benchmark_values": ["ok"]}},
    ]
    text = json.dumps([record(metric=m) for m in metrics])
    rows = parse_text(text).results
    assert [(r["unit"], r.get("higher_is_better")) for r in rows] == [
        ("", True),
        ("ms", None),
        ("s", None),
        ("", None),  # a text value needs no direction
    ]
    ROWS.validate_python(rows)


@pytest.mark.parametrize(
    ("name", "higher"),
    [
        ("forward_latency", False),
        ("memory_bandwidth", True),
        ("time_per_token", False),
        ("samples_per_second", True),
        ("peak_mem", False),
        ("attention_sparsity", True),
        ("widgets", None),
    ],
)
def test_direction_from_name(name: str, higher: bool | None) -> None:
    assert direction_from_name(name) is higher


def test_dependencies_fill_environment() -> None:
    dependencies = {
        "pytorch": {"version": "2.6.0.dev20241101+rocm6.2", "sha": "3f2c9e1"},
        "triton": "3.1.0",
        "numpy": "2.1.2",
        "transformers": {"version": "4.46.0", "commit": "abc"},
        "rocm": {"version": "6.2.4"},
        "weird": {"flags": ["x"]},
    }
    parsed = parse_text(json.dumps(record(dependencies=dependencies)))
    assert parsed.environment == {
        "torch": "2.6.0.dev20241101+rocm6.2",
        "torch_git_sha": "3f2c9e1",
        "triton": "3.1.0",
        "hip": "6.2.4",
        "packages": {"numpy": "2.1.2", "transformers": "4.46.0"},
        "extra": {
            "dependencies": {
                "transformers": {"version": "4.46.0", "commit": "abc"},
                "weird": {"flags": ["x"]},
            }
        },
    }
    EnvironmentIn.model_validate(parsed.environment)
    assert "dependencies" not in parsed.results[0]["extra"]


def test_timestamp_in_milliseconds_and_unknown_top_level_keys() -> None:
    parsed = parse_text(json.dumps(record(timestamp=1735689600000, test_name="t1")))
    assert parsed.run["started_at"] == "2025-01-01T00:00:00Z"
    assert parsed.results[0]["extra"]["test_name"] == "t1"


def test_tolerates_a_byte_order_mark_and_blank_lines() -> None:
    text = (
        "\ufeff" + json.dumps(record()) + "\n\n" + json.dumps(record(model={"name": "mul"})) + "\n"
    )
    assert [r["model"] for r in parse_text(text).results] == ["add", "mul"]


def broken_document() -> str:
    text = json.dumps([record(), record(model={"name": "mul"})], indent=2)
    return text.replace('"mul"\n', '"mul",\n', 1)  # a trailing comma: "}" on line 29 fails


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        (broken_document(), (None, 29, None), "line 29, column 5"),
        (
            json.dumps(record()) + "\n" + '{"benchmark": {"name": "b"},\n',
            (None, 2, None),
            "line 2, column",
        ),
        (
            json.dumps(record())
            + "\n"
            + json.dumps({"benchmark": {"name": "b"}, "model": {"name": "m"}}),
            (1, 2, "metric"),
            "no 'metric'",
        ),
        (
            json.dumps(record())
            + "\n"
            + json.dumps(
                [
                    record(model={"name": "x"}),
                    record(metric={"name": "latency", "benchmark_values": [1.0, 2.0, "fast"]}),
                ]
            ),
            (2, 2, "metric.benchmark_values[2]"),
            "'fast' is not a number",
        ),
        (
            json.dumps([record(), record(metric={"name": "latency", "benchmark_values": [True]})]),
            (1, None, "metric.benchmark_values[0]"),
            "not a number",
        ),
        (
            json.dumps([record(metric={"name": "latency", "benchmark_values": [float("nan")]})]),
            (0, None, "metric.benchmark_values[0]"),
            "not a JSON number",
        ),
        ("[1]", (0, None, None), "must be a JSON object"),
        (json.dumps(record(benchmark="b")), (0, None, "benchmark"), "must be a JSON object"),
        (json.dumps(record(model={"backend": "eager"})), (0, None, "model.name"), "non-empty"),
        (
            json.dumps(record(benchmark={"name": "b", "dtype": "int3"})),
            (0, None, "benchmark.dtype"),
            "precision=",
        ),
        (
            json.dumps(record(benchmark={"name": "b", "mode": "prefill"})),
            (0, None, "benchmark.mode"),
            "mode=",
        ),
        (
            json.dumps(record(model={"name": "m", "backend": "my backend"})),
            (0, None, "model.backend"),
            "config name",
        ),
        (
            json.dumps(record(metric={"name": "widgets", "benchmark_values": [1]})),
            (0, None, "metric.name"),
            "higher is better",
        ),
        (
            json.dumps(
                record(metric={"name": "latency", "unit": "fortnights", "benchmark_values": [1]})
            ),
            (0, None, "metric.unit"),
            "unknown unit",
        ),
        (
            json.dumps(record(benchmark={"name": "b", "extra_info": {"batch_size": "16"}})),
            (0, None, "benchmark.extra_info.batch_size"),
            "whole number",
        ),
        (json.dumps([record(), record()]), (1, None, "metric.name"), "duplicates record 0"),
        (
            json.dumps(
                [
                    record(runners=[{"name": "cuda", "type": "NVIDIA A100"}]),
                    record(model={"name": "x"}, runners=[{"name": "cuda", "type": "NVIDIA H100"}]),
                ]
            ),
            (1, None, "runners[0]"),
            "differs from record 0",
        ),
        (
            json.dumps(record(runners=[{"name": "cpu", "cpu_count": "26"}])),
            (0, None, "runners[0].cpu_count"),
            "whole number",
        ),
        (json.dumps(record(runners={"name": "cpu"})), (0, None, "runners"), "list of runners"),
        (
            json.dumps([record(head_sha="a"), record(model={"name": "x"}, head_sha="b")]),
            (1, None, "head_sha"),
            "differs",
        ),
        (json.dumps(record(timestamp="yesterday")), (0, None, "timestamp"), "seconds since 1970"),
        (json.dumps(record()) + "\n" + "42\n", (None, 2, None), "object or a list of objects"),
    ],
)
def test_errors_name_record_line_and_field(
    text: str, where: tuple[int | None, int | None, str | None], message: str
) -> None:
    error = upload_error(text)
    assert (error.record, error.line, error.field) == where
    assert message in error.message
    assert error.file == "up.json"


@pytest.mark.parametrize("text", ["", "  \n", "[]"])
def test_a_file_without_records_is_an_error(text: str) -> None:
    error = upload_error(text)
    assert (error.message, error.record, error.line) == (
        "the file holds no benchmark records",
        None,
        None,
    )


def test_not_utf8_is_an_error_with_its_line() -> None:
    with pytest.raises(UploadError) as caught:
        parse_pytorch_v3(UploadFile("up.json", b'[\n{"a": "\xff"}]'), Hints())
    assert (caught.value.line, caught.value.record) == (2, None)


def test_a_dtype_hint_overrides_an_unknown_dtype() -> None:
    text = json.dumps(record(benchmark={"name": "b", "dtype": "int4wo-64"}))
    (row,) = parse_text(text, Hints(precision="int4")).results
    assert row["precision"] == "int4"
    assert row["extra"]["benchmark"]["dtype"] == "int4wo-64"


def test_parsed_torchinductor_run_is_ingested(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    content = b"".join(
        (DATA / name).read_bytes()
        for name in (
            "constructed__torchinductor_perf_records.jsonl",
            "constructed__torchinductor_accuracy_record.jsonl",
        )
    )
    parsed = parse_pytorch_v3(UploadFile("dynamo.jsonl", content), Hints())
    payload = ingestible(parsed).model_dump(mode="json", exclude_unset=True)
    response = client.post("/api/v1/runs", json=payload, headers=ingest_headers)
    assert response.status_code == 201, response.text
    run = client.get(f"/api/v1/runs/{response.json()['id']}").json()
    stored = {r["metric"]: r for r in run["results"]}
    assert {m: (r["value"], r["unit"], r["text_value"]) for m, r in stored.items()} == {
        "speedup": (2.6028, "x", None),
        "abs_latency": (22.2879, "ms", None),
        "compilation_latency": (41.0046, "s", None),
        "compression_ratio": (1.1965, "x", None),
        "accuracy": (None, "", "pass"),
        "graph_breaks": (0.0, "count", None),
    }
    assert {(r["suite"], r["config"], r["batch_size"]) for r in stored.values()} == {
        ("torchbench", "cudagraphs", 16)
    }
    assert run["coverage"] == {"attempted": 1, "passed": 1, "failed": 0, "skipped": 0}
