"""TensorFlow input pipeline: tf.data with parallel decode and prefetch.

The idiomatic fast path of TensorFlow's own ResNet input pipeline: draw the crop window
with `sample_distorted_bounding_box` from the JPEG header's shape (the same area and
aspect-ratio ranges as the other frameworks, frameworks.datasets.SCALE / RATIO), decode
only that window with `decode_and_crop_jpeg`, resize bilinearly, flip, normalise.
`loader_workers` sizes the map's parallelism and the pipeline's private thread pool.
"""

from __future__ import annotations

import numpy as np

from frameworks.contract import RunSpec
from frameworks.datasets import MEAN, RATIO, SCALE, STD, DatasetError, scan


class Feed:
    def __init__(self, spec: RunSpec, rank: int, world: int, device: str = "/CPU:0",
                 channels_last: bool = True, once: bool = False) -> None:
        import tensorflow as tf

        self.tf = tf
        self.listing = scan(spec.data, rank, world, 0 if once else spec.batch_size)
        items = self.listing.items
        self.device = device
        self.channels_last = channels_last
        self.workers = spec.loader_workers
        size = spec.image_size
        mean = tf.constant(MEAN, tf.float32) * 255
        std = tf.constant(STD, tf.float32) * 255
        whole = tf.constant([[[0.0, 0.0, 1.0, 1.0]]], tf.float32)
        seed = spec.seed + 1000 * rank  # the shuffle's; crops follow TF's global seed

        def load(path, label, index):
            raw = tf.io.read_file(path)
            begin, extent, _ = tf.image.sample_distorted_bounding_box(
                tf.io.extract_jpeg_shape(raw), whole, min_object_covered=0.0,
                aspect_ratio_range=RATIO, area_range=SCALE, max_attempts=10,
                use_image_if_no_bounding_boxes=True)
            window = tf.stack([begin[0], begin[1], extent[0], extent[1]])
            img = tf.io.decode_and_crop_jpeg(raw, window, channels=3)
            img = tf.image.resize(img, [size, size], method="bilinear")
            img = tf.image.random_flip_left_right(img)
            return (img - mean) / std, label, index

        paths = [p for p, _, _ in items]
        labels = np.array([lb for _, lb, _ in items], np.int64)
        indices = np.array([i for _, _, i in items], np.int64)
        ds = tf.data.Dataset.from_tensor_slices((paths, labels, indices))
        if not once:
            ds = ds.shuffle(len(items), seed=seed, reshuffle_each_iteration=True).repeat()
        ds = ds.map(load, num_parallel_calls=self.workers or None, deterministic=once)
        ds = ds.batch(spec.batch_size, drop_remainder=not once)
        ds = ds.prefetch(tf.data.AUTOTUNE if self.workers else 0)
        options = tf.data.Options()
        options.threading.private_threadpool_size = max(1, self.workers)
        self.dataset = ds.with_options(options)
        self._it = iter(self.dataset)
        self.batch = None

    def next_batch(self) -> None:
        """Wait for the next host batch (t_io); StopIteration ends a `once` pass."""
        try:
            self.batch = next(self._it)
        except self.tf.errors.InvalidArgumentError as exc:
            raise DatasetError(self._undecodable(exc)) from None

    def _undecodable(self, exc: Exception) -> str:
        """tf.data's decode error does not name the file: find it (failure path only)."""
        tf = self.tf
        for path, _, _ in self.listing.items:
            try:
                tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
            except tf.errors.InvalidArgumentError as err:
                return f"cannot decode {path}: {err.message.splitlines()[-1][:200]}"
        return f"tf.data failed to decode a batch: {str(exc).splitlines()[-1][:300]}"

    def to_device(self):
        """Place the batch on the training device in its layout (t_h2d)."""
        tf = self.tf
        images, labels, _ = self.batch
        with tf.device(self.device):
            images = tf.identity(images) if self.channels_last else tf.transpose(
                images, [0, 3, 1, 2])
            return images, tf.identity(labels)

    def synchronize(self) -> None:
        if self.device.startswith("/GPU"):
            self.tf.test.experimental.sync_devices()

    def batch_numpy(self):
        images, labels, index = self.batch
        return images.numpy(), labels.numpy(), index.numpy()

    def settings(self) -> dict:
        return {"loader": "tf.data (decode_and_crop_jpeg, parallel map, prefetch)",
                "loader_workers": self.workers}

    def close(self) -> None:
        self._it = iter(())


def build_feed(spec: RunSpec, rank: int = 0, world: int = 1, once: bool = False) -> Feed:
    """The pipeline alone (loader mode, data check): no model is built."""
    from frameworks.contract import worker_threads
    from frameworks.tensorflow.adapter import _configure_threads, resolve_layout

    _configure_threads(worker_threads(spec))
    return Feed(spec, rank, world, "/GPU:0" if spec.device == "cuda" else "/CPU:0",
                resolve_layout(spec) == "channels_last", once=once)
