import pytest

from frameworks.contract import RunSpec, SpecError, validate


def spec(**kw):
    return RunSpec(**{"framework": "torch", "model": "resnet50", "image_size": 32, **kw})


@pytest.mark.parametrize("kw, message", [
    ({"framework": "caffe"}, "framework = 'caffe' is not one of: torch"),
    ({"model": "vgg"}, "model = 'vgg' is not one of"),
    ({"mode": "fast"}, "mode = 'fast' is not one of: throughput, breakdown"),
    ({"batch_size": 0}, "batch_size = 0 must be a whole number >= 1"),
    ({"strategy": "ps-sync"}, "PyTorch has no native parameter server"),
    ({"model": "alexnet"}, "smallest image size alexnet accepts is 63 px"),
    ({"nodes": 2}, "strategy 'single' runs one worker"),
    ({"xla": True}, "xla = true is unsupported for torch"),
])
def test_validation_names_field_value_and_fix(kw, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(")):
        validate(spec(**kw))


def test_json_round_trip_and_hash_ignores_label():
    s = spec(label="x")
    assert RunSpec.from_json(s.to_json()) == s
    assert s.config_hash() == spec(label="y", timeout_s=5).config_hash()
    assert s.config_hash() != spec(batch_size=8).config_hash()
    with pytest.raises(SpecError, match="unknown RunSpec field"):
        RunSpec.from_dict({"framework": "torch", "model": "resnet50", "bacth": 2})
