"""A training job that saves its input position with its model, for the resume tests.

``python resume_jobs.py MODE OUTPUT_DIR WORK_DIR SHUFFLE STEPS KILL_AFTER`` trains a tiny model
on ``load(OUTPUT_DIR, "TRAIN", shuffle=SHUFFLE, seed=7, batch_size=4, epochs=None)`` for STEPS
batches in all (SHUFFLE ``default`` and ``buffer``: load()'s one-epoch pipeline without and
with ``shuffle=True``), restoring first whatever WORK_DIR holds, and prints ``BATCH [file names]`` for
each batch it trains on. MODE ``checkpoint`` is a custom loop saving
``tf.train.Checkpoint(model=..., it=iterator)`` after every batch; ``keras`` is ``model.fit``
with ``tfrecorder_lite.BackupAndRestore(save_freq=1)``, 15 steps an epoch; ``keras-map`` is
``keras`` on the dataset followed by a normalizing ``map()`` and ``prefetch()``. With KILL_AFTER
k > 0 the job kills itself (SIGKILL) after its k-th batch of this run, once it is saved.
At the end it prints ``STATE <bytes>``: the size of a checkpoint of the iterator alone.
"""

import json
import os
import signal
import sys

import keras
import tensorflow as tf

import tfrecorder_lite

STEPS_PER_EPOCH = 15


def names(batch):
    return [name.decode() for name in batch["image/filename"].numpy()]


def state_size(iterator, folder):
    path = tf.train.Checkpoint(it=iterator).write(os.path.join(folder, "state", "it"))
    files = [f for f in os.listdir(os.path.dirname(path)) if f.startswith("it")]
    return sum(os.path.getsize(os.path.join(os.path.dirname(path), f)) for f in files)


def model_of(base):
    return base([keras.Input((8, 8, 3)), keras.layers.Flatten(), keras.layers.Dense(10)])


def custom_loop(dataset, work, steps, kill_after):
    model = model_of(keras.Sequential)
    optimizer = keras.optimizers.SGD(0.01)
    iterator = iter(dataset)
    step = tf.Variable(0, dtype=tf.int64)
    checkpoint = tf.train.Checkpoint(model=model, it=iterator, step=step)
    manager = tf.train.CheckpointManager(checkpoint, os.path.join(work, "ckpt"), max_to_keep=1)
    manager.restore_or_initialize()
    done = 0
    while step < steps:
        batch = next(iterator)
        print("BATCH", json.dumps(names(batch)), flush=True)
        with tf.GradientTape() as tape:
            logits = model(tf.cast(batch["image"], tf.float32) / 255)
            loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
                batch["image/class/label"], logits, from_logits=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                      model.trainable_variables))
        step.assign_add(1)
        manager.save()
        done += 1
        if done == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
    print("STATE", state_size(iterator, work), flush=True)


class Recording(keras.Sequential):
    """Prints the file names of every batch it trains on."""

    def train_step(self, data):
        print("BATCH", json.dumps(names(data)), flush=True)
        image = data["image"]  # uint8, or float already with keras-map
        image = tf.cast(image, tf.float32) / 255 if image.dtype == tf.uint8 else image
        return super().train_step((image, data["image/class/label"]))


def normalize(batch):
    """A preprocessing map after load(): the images as floats in [0, 1]."""
    return {**batch, "image": tf.cast(batch["image"], tf.float32) / 255}


class KillAfter(keras.callbacks.Callback):
    def __init__(self, batches):
        super().__init__()
        self.batches, self.done = batches, 0

    def on_train_batch_end(self, batch, logs=None):
        self.done += 1
        if self.done == self.batches:
            os.kill(os.getpid(), signal.SIGKILL)


def keras_fit(dataset, work, steps, kill_after):
    model = model_of(Recording)
    model.compile(keras.optimizers.SGD(0.01),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=True)
    callbacks = [tfrecorder_lite.BackupAndRestore(os.path.join(work, "backup"), dataset,
                                                  save_freq=1, delete_checkpoint=False)]
    if kill_after > 0:
        callbacks.append(KillAfter(kill_after))
    model.fit(dataset, epochs=steps // STEPS_PER_EPOCH, steps_per_epoch=STEPS_PER_EPOCH,
              callbacks=callbacks, verbose=0)


if __name__ == "__main__":
    mode, out, work, shuffle, steps, kill_after = sys.argv[1:]
    if shuffle in ("default", "buffer"):  # load()'s own pipeline, one epoch (not by index)
        data = tfrecorder_lite.load(out, "TRAIN", batch_size=4, image_size=(8, 8),
                                    as_supervised=False, seed=7, shuffle=shuffle == "buffer")
    else:
        data = tfrecorder_lite.load(out, "TRAIN", batch_size=4, image_size=(8, 8),
                                    as_supervised=False, seed=7, epochs=None,
                                    shuffle="global" if shuffle == "global" else False)
    if mode == "keras-map":
        data = data.map(normalize, num_parallel_calls=2).prefetch(2)
    {"checkpoint": custom_loop, "keras": keras_fit, "keras-map": keras_fit}[mode](
        data, work, int(steps), int(kill_after))
