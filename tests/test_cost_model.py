"""The cost model must equal the published reference figures exactly (DESIGN.md 4)."""

import pytest

from models import UnknownModelError, build
from models.cost import ShapeError, cost, min_image_size

REFERENCE = {  # params, forward GMACs (3 decimals), parameter tensors
    "alexnet": (61_100_840, 0.714, 16),
    "googlenet": (6_624_904, 1.498, 173),
    "resnet50": (25_557_032, 4.089, 161),
}


@pytest.mark.parametrize("model", REFERENCE)
def test_reference_totals_at_224(model):
    params, gmacs, tensors = REFERENCE[model]
    c = cost(model, 224, 1000)
    assert c.params == params
    assert round(c.macs / 1e9, 3) == gmacs
    assert len(c.tensors) == tensors


def test_resnet50_gradient_facts():
    c = cost("resnet50")
    assert c.gradient_bytes == 102_228_128
    big = [t for t in c.tensors if len(t.shape) > 1]
    assert len(big) == 54  # 53 conv kernels + fc weight
    assert round(sum(t.numel for t in big) / c.params, 4) == 0.9979
    largest = sorted((t.numel for t in c.tensors), reverse=True)[:5]
    assert largest == [2_359_296] * 3 + [2_097_152, 2_048_000]
    convs = [t for t in c.tensors if len(t.shape) == 4]
    assert len(convs) == 53 and all(t.name == "weight" for t in convs)


def test_backward_order_starts_at_the_classifier():
    order = cost("resnet50").backward_order
    assert order[0].layer == "fc" and order[-1].layer in ("conv1", "bn1")
    assert sorted(t.key for t in order) == sorted(t.key for t in cost("resnet50").tensors)


def test_parameters_do_not_depend_on_image_size_but_macs_do():
    for model in ("googlenet", "resnet50"):
        small, large = cost(model, 32), cost(model, 224)
        assert small.params == large.params and small.macs < large.macs


def test_small_inputs_and_minimum_sizes():
    assert cost("resnet50", 32).params == 25_557_032
    assert cost("googlenet", 32).params == 6_624_904
    assert min_image_size(build("alexnet")) == 63
    with pytest.raises(ShapeError, match="smallest image size alexnet accepts is 63 px"):
        cost("alexnet", 32)


def test_num_classes_changes_only_the_classifier():
    assert cost("resnet50", 64, 10).params == 25_557_032 - 2048 * 990 - 990


def test_unknown_model_names_the_known_ones():
    with pytest.raises(UnknownModelError, match="alexnet, googlenet, resnet50"):
        build("vgg16")
