"""Keras 3 training that resumes its input too: :class:`BackupAndRestore`.

Keras' own ``BackupAndRestore`` saves the weights every ``save_freq`` batches, but restores
only the epoch: the interrupted epoch runs again from its first batch, on records the model
has already trained on. This one also saves how many batches were trained, and on restore
starts the dataset's next iterator at the global position those batches reached and ends the
resumed epoch where the interrupted one would have ended: after a ``kill -9`` at any step,
training goes on with exactly the batches the uninterrupted run would have trained next.
"""

import json

import keras
from keras.src.utils import file_utils

from ..errors import SchemaError

# tf.data transformations that give one element for each element of their input, in order: a
# step after them is a batch of load()'s, so load()'s position can be counted through them
_ONE_FOR_ONE = ("MapDataset", "ParallelMapDataset", "PrefetchDataset", "OptionsDataset")


def load_position(dataset):
    """The InputPosition of the ``load()`` dataset that ``dataset`` is, or is made of by
    ``map()`` and ``prefetch()`` (and ``with_options()``) applied after it.

    Raises:
        SchemaError: no ``load()`` dataset read by index under ``dataset``, or a
            transformation between them that does not give one element per element (its
            name said), through which batches trained cannot be counted as ``load()``'s.
    """
    found, between = dataset, []
    while found is not None and getattr(found, "_tfrecorder_lite_position", None) is None:
        between.append(type(found).__name__.lstrip("_"))
        inputs = found._inputs() if hasattr(found, "_inputs") else []
        found = inputs[0] if len(inputs) == 1 else None
    position = getattr(found, "_tfrecorder_lite_position", None)
    if position is None or position.stop is not None:
        raise SchemaError(
            "BackupAndRestore needs the dataset load() returns with epochs=None (an endless "
            "stream read by index, e.g. load(..., shuffle='global', seed=1, epochs=None)), "
            "passed to fit() as it is or after map() and prefetch(), with steps_per_epoch")
    other = next((name for name in between if name not in _ONE_FOR_ONE), None)
    if other is not None:
        raise SchemaError(
            f"BackupAndRestore counts the batches trained as batches of load(): between "
            f"load() and fit() only map(), prefetch() and with_options() keep one batch per "
            f"step, and the dataset has a {other}. Give load() the batch_size (and shuffle) "
            "instead, and apply only element-wise maps after it")
    return position


class BackupAndRestore(keras.callbacks.BackupAndRestore):
    """Keras' ``BackupAndRestore`` that also resumes a ``load()`` dataset's position.

    Give it the dataset passed to ``fit``: one ``load()`` returned with ``epochs=None`` (an
    endless stream, read by index), as it is or followed by element-wise ``map()`` (e.g. a
    normalization) and ``prefetch()``, and give ``fit`` a ``steps_per_epoch``. List it before
    callbacks that stop training at an epoch's end (it clears the stop it sets to end a
    resumed epoch early).

    Args:
        backup_dir: as Keras' (the weights and ``training_metadata.json``, which gains
            ``"steps"``: the batches trained).
        dataset: the dataset ``fit`` trains on.
        save_freq, double_checkpoint, delete_checkpoint: as Keras'.

    Raises:
        SchemaError: the dataset is not an endless ``load()`` dataset read by index, or is
            made of one by transformations other than ``map()`` and ``prefetch()``.
    """

    def __init__(self, backup_dir, dataset, save_freq="epoch", double_checkpoint=False,
                 delete_checkpoint=True):
        position = load_position(dataset)
        super().__init__(backup_dir, save_freq, double_checkpoint, delete_checkpoint)
        self._position = position
        self._first = position.next_start  # the global position of step 0
        self._steps = 0  # batches trained since step 0
        self._resumed_epoch, self._skipped = None, 0
        self._epoch_base = self._epoch_end = 0  # steps before this epoch's first, after its last
        self._stopped = False

    def _steps_per_epoch(self):
        steps = (self.params or {}).get("steps")
        if not steps:
            raise SchemaError("BackupAndRestore with a load() dataset needs fit(..., "
                              "steps_per_epoch=N): its dataset is endless")
        return steps

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        per_epoch = self._steps_per_epoch()
        steps = 0
        if file_utils.exists(self._training_metadata_path):
            with file_utils.File(self._training_metadata_path, "r") as f:
                steps = json.loads(f.read()).get("steps", 0)
        self._steps = steps
        self._position.next_start = self._position.after_steps(self._first, steps)
        self._resumed_epoch, self._skipped = divmod(steps, per_epoch)
        self.model._initial_epoch = self._current_epoch = self._resumed_epoch

    def on_epoch_begin(self, epoch, logs=None):
        per_epoch = self._steps_per_epoch()
        self._epoch_base = epoch * per_epoch + \
            (self._skipped if epoch == self._resumed_epoch else 0)
        self._epoch_end = (epoch + 1) * per_epoch

    def on_train_batch_end(self, batch, logs=None):
        self._steps = self._epoch_base + batch + 1
        if self._steps >= self._epoch_end and self._epoch_base % self._steps_per_epoch():
            # a resumed epoch, at the end the interrupted one had: end it here
            self.model.stop_training = self._stopped = True
        super().on_train_batch_end(batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        if self._stopped:
            self.model.stop_training = self._stopped = False
        self._steps = (epoch + 1) * self._steps_per_epoch()
        super().on_epoch_end(epoch, logs)

    def _save_model(self):
        """As Keras' own, with the batches trained in the metadata."""
        if not file_utils.exists(self.backup_dir):
            file_utils.makedirs(self.backup_dir)
        if self.double_checkpoint and file_utils.exists(self._weights_path):
            file_utils.copy(self._weights_path, self._prev_weights_path)
        if self.double_checkpoint and file_utils.exists(self._training_metadata_path):
            file_utils.copy(self._training_metadata_path, self._prev_training_metadata_path)
        self.model.save_weights(filepath=self._weights_path, overwrite=True)
        with file_utils.File(self._training_metadata_path, "w") as f:
            f.write(json.dumps({"epoch": self._current_epoch, "batch": self._last_batch_seen,
                                "steps": self._steps}))
