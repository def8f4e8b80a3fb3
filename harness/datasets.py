"""`dnnbench data make`: a small ImageNet-style folder of real JPEG files.

Tests and demos need real files to decode (the cost the synthetic-data runs leave out),
but no dataset can be downloaded here and ImageNet's licence forbids shipping it. The
images are deterministic (seeded) pictures with class-dependent colour and structure and
varied sizes and aspect ratios, saved at quality 90 like typical photo JPEGs, so decode
and resize cost per pixel is realistic. Pillow only: the harness never imports a
deep-learning framework.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from frameworks.datasets import DatasetError


def _picture(rng: np.random.Generator, label: int, classes: int, width: int,
             height: int) -> np.ndarray:
    """An RGB uint8 image: a class-coloured gradient, a few shapes, sensor-like noise."""
    hue = 2 * np.pi * label / max(1, classes)
    base = 127 + 100 * np.array([np.cos(hue), np.cos(hue + 2.1), np.cos(hue + 4.2)])
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    angle = rng.uniform(0, 2 * np.pi)
    ramp = (np.cos(angle) * xx / width + np.sin(angle) * yy / height)[..., None]
    img = base[None, None, :] * (0.6 + 0.4 * ramp)
    for _ in range(3):
        cx, cy = rng.uniform(0, width), rng.uniform(0, height)
        r = rng.uniform(0.1, 0.3) * min(width, height)
        mask = (xx - cx) ** 2 + (yy - cy) ** 2 < r * r
        img[mask] = rng.uniform(0, 255, 3)
    img += rng.normal(0, 12, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def make(root: str | Path, images: int, size: int = 256, classes: int = 10, seed: int = 0,
         quality: int = 90, progress: Callable[[int, int], None] | None = None) -> dict:
    """Write `images` JPEGs spread evenly over `classes` folders; returns a summary.

    Sizes vary from 0.75x to 1.5x `size` per side independently (aspect ratios from
    1:2 to 2:1), like photographs, so the loaders' resize really does work.
    """
    from PIL import Image

    if images < 1 or classes < 1 or size < 8:
        raise DatasetError(f"images = {images}, classes = {classes}, size = {size}: need "
                           "images >= 1, classes >= 1 and size >= 8 px")
    if classes > images:
        raise DatasetError(f"classes = {classes} is more than images = {images}: every class "
                           "folder needs at least one image")
    root = Path(root)
    if root.exists() and any(root.iterdir()):
        raise DatasetError(f"{root} exists and is not empty; choose a new folder (files are "
                           "never overwritten)")
    rng = np.random.default_rng(seed)
    width_digits = len(str(classes - 1))
    t0 = time.monotonic()
    total_bytes = 0
    for i in range(images):
        label = i % classes
        folder = root / f"class_{label:0{width_digits}d}"
        folder.mkdir(parents=True, exist_ok=True)
        w = int(size * rng.uniform(0.75, 1.5))
        h = int(size * rng.uniform(0.75, 1.5))
        path = folder / f"img_{i:07d}.jpg"
        tmp = path.with_suffix(".tmp")
        Image.fromarray(_picture(rng, label, classes, w, h)).save(tmp, "JPEG",
                                                                  quality=quality)
        os.replace(tmp, path)  # a killed run never leaves a half-written .jpg
        total_bytes += path.stat().st_size
        if progress is not None:
            progress(i + 1, images)
    return {"root": str(root), "images": images, "classes": classes, "size": size,
            "bytes": total_bytes, "seconds": round(time.monotonic() - t0, 2)}
