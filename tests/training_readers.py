"""Read a split through data_source() with Grain's or PyTorch's loader and 2 worker processes.

``python training_readers.py grain|torch OUTPUT_DIR EPOCHS`` prints, as JSON, the file names of
the records read in each epoch. A script of its own, so that the loaders start their workers
from a clean process (Grain spawns them), as a training job does.
"""

import json
import sys

import tfrecorder_lite


def names(batch):
    """A collate function: the records' file names."""
    return [record["image/filename"].decode() for record in batch]


def grain_epochs(src, epochs):
    import grain

    sampler = grain.samplers.IndexSampler(len(src), shuffle=True, num_epochs=epochs, seed=3)
    loader = grain.DataLoader(data_source=src, sampler=sampler, worker_count=2)
    found = [record["image/filename"].decode() for record in loader]
    return [found[i * len(src):(i + 1) * len(src)] for i in range(epochs)]


def torch_epochs(src, epochs):
    from torch.utils.data import DataLoader

    loader = DataLoader(src, batch_size=4, shuffle=True, num_workers=2, collate_fn=names)
    return [[name for batch in loader for name in batch] for _ in range(epochs)]


if __name__ == "__main__":
    kind, out, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    source = tfrecorder_lite.data_source(out, "TRAIN", decode_image=True)
    print(json.dumps({"grain": grain_epochs, "torch": torch_epochs}[kind](source, epochs)))
