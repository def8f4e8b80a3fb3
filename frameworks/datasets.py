"""What every framework's input pipeline shares: the dataset listing, the shard a worker
reads, the augmentation's parameters and the normalisation constants.

Dependency-free (no NumPy, no framework): the three loaders decode with their own
framework's code, but which files exist, which are skipped as corrupt, which worker reads
which file and how a random-resized crop is drawn are decided here, once, so "the same
pipeline in each framework" is true by construction.

Layout read: the ImageNet training-folder convention, ``ROOT/<class>/<image>.jpg``;
classes are the sorted sub-folder names, labels their positions.
"""

from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass, field

EXTENSIONS = (".jpg", ".jpeg")
#: ImageNet channel statistics (RGB, 0..1 scale), as every reference pipeline uses.
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
#: RandomResizedCrop's defaults (Inception / torchvision): area and aspect-ratio ranges.
SCALE = (0.08, 1.0)
RATIO = (3 / 4, 4 / 3)


class DatasetError(ValueError):
    """The data folder cannot be used; the message names the path and the fix."""


@dataclass
class Listing:
    """One worker's view of a dataset: every class, its shard of the files, the skips."""

    root: str
    classes: list[str]
    items: list[tuple[str, int, int]]  # (path, label, index in the whole dataset)
    total_files: int
    corrupt: list[str] = field(default_factory=list)  # skipped files (of this shard)

    def summary(self) -> dict:
        return {"root": self.root, "classes": len(self.classes), "files": self.total_files,
                "shard_files": len(self.items), "corrupt_skipped": len(self.corrupt),
                "corrupt_examples": [os.path.relpath(p, self.root) for p in self.corrupt[:5]]}


def looks_like_jpeg(path: str) -> bool:
    """A complete JPEG starts with SOI (FF D8) and has EOI (FF D9) near its end.

    Catches truncated, empty and non-JPEG files without decoding; a file that passes but
    fails to decode stops the run with the framework's error naming it.
    """
    try:
        with open(path, "rb") as f:
            if f.read(2) != b"\xff\xd8":
                return False
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 1024))
            return b"\xff\xd9" in f.read()
    except OSError:
        return False


def list_files(root: str) -> tuple[list[str], list[tuple[str, int]]]:
    """Classes and every (path, label) in a stable order; DatasetError if unusable."""
    if not root:
        raise DatasetError("no dataset given: set data to an ImageNet-style folder")
    if not os.path.isdir(root):
        raise DatasetError(f"data = {root!r} is not a directory; make one with "
                           f"`dnnbench data make {root}` or point at an ImageNet-style folder "
                           "(ROOT/<class>/<image>.jpg)")
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    if not classes:
        raise DatasetError(f"data = {root!r} has no class sub-folders; expected "
                           "ROOT/<class>/<image>.jpg (the ImageNet training layout)")
    files: list[tuple[str, int]] = []
    for label, name in enumerate(classes):
        folder = os.path.join(root, name)
        for entry in sorted(os.listdir(folder)):
            if entry.lower().endswith(EXTENSIONS):
                files.append((os.path.join(folder, entry), label))
    if not files:
        raise DatasetError(f"data = {root!r} has {len(classes)} class folders but no .jpg/.jpeg "
                           "files in them")
    return classes, files


def shard_indices(total: int, rank: int, world: int) -> range:
    """Worker `rank` of `world` reads every world-th file: disjoint, and together all."""
    if not 0 <= rank < world:
        raise DatasetError(f"rank {rank} is outside 0..{world - 1}")
    return range(rank, total, world)


def scan(root: str, rank: int = 0, world: int = 1, batch_size: int = 0) -> Listing:
    """This worker's shard, with files that are not complete JPEGs skipped and counted;
    with `batch_size`, DatasetError unless the shard fills at least one batch.

    Only the shard's files are opened, so each worker checks 1/world of a large dataset.
    """
    classes, files = list_files(root)
    items: list[tuple[str, int, int]] = []
    corrupt: list[str] = []
    for i in shard_indices(len(files), rank, world):
        path, label = files[i]
        if looks_like_jpeg(path):
            items.append((path, label, i))
        else:
            corrupt.append(path)
    if not items:
        raise DatasetError(f"data = {root!r}: none of the {len(corrupt)} files of worker "
                           f"{rank}'s shard is a complete JPEG")
    if len(items) < batch_size:
        raise DatasetError(f"worker {rank}'s shard of {root} has {len(items)} images, fewer "
                           f"than one batch of {batch_size}: use more images or a smaller "
                           "batch")
    return Listing(root, classes, items, len(files), corrupt)


def crop_box(rng: random.Random, width: int, height: int) -> tuple[int, int, int, int]:
    """A random-resized-crop window (left, top, w, h): torchvision's algorithm (10 tries at
    a random area in SCALE and log-uniform aspect ratio in RATIO, then a centre crop at the
    nearest allowed ratio), for loaders whose framework has no such op."""
    area = width * height
    log_ratio = (math.log(RATIO[0]), math.log(RATIO[1]))
    for _ in range(10):
        target = area * rng.uniform(*SCALE)
        aspect = math.exp(rng.uniform(*log_ratio))
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, width - w), rng.randint(0, height - h), w, h
    in_ratio = width / height
    if in_ratio < RATIO[0]:
        w, h = width, round(width / RATIO[0])
    elif in_ratio > RATIO[1]:
        w, h = round(height * RATIO[1]), height
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


def decode_augment(path: str, size: int, rng: random.Random):
    """One training sample as loaders without their own augmentation ops make it: Pillow
    decode, the crop_box window resized to size x size (bilinear, as torchvision does on
    PIL images), a horizontal flip with probability 1/2, ImageNet normalisation. Returns
    an HWC float32 array; DatasetError names a file that does not decode."""
    import numpy as np
    from PIL import Image

    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            left, top, w, h = crop_box(rng, *im.size)
            im = im.resize((size, size), Image.BILINEAR, box=(left, top, left + w, top + h))
    except OSError as exc:
        raise DatasetError(f"cannot decode {path}: {exc}") from None
    if rng.random() < 0.5:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    mean = np.array(MEAN, dtype=np.float32) * 255
    inv_std = 1 / (np.array(STD, dtype=np.float32) * 255)
    return (np.asarray(im, dtype=np.float32) - mean) * inv_std
