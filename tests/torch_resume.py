"""A PyTorch job reading a split in random order through tfrecorder_lite.RecordSampler, for the
resume tests.

``python torch_resume.py LOADER OUTPUT_DIR WORK_DIR EPOCHS STOP_AFTER`` reads ``EPOCHS`` epochs
of TRAIN (seed 5, batches of 4, 2 worker processes), restoring first what WORK_DIR holds, and
prints ``BATCH [file names]`` for each batch. With STOP_AFTER k > 0 it saves its state after
its k-th batch of this run and exits, as a preempted job would (a new process resumes).
LOADER ``stateful`` is torchdata's StatefulDataLoader, whose ``state_dict()`` holds the
sampler's; ``torch`` is torch's own DataLoader, restarted with the sampler's ``start`` at the
position the batches trained reached. A script of its own, so that the workers start from a
clean process, as a training job's do.
"""

import json
import os
import sys

import tfrecorder_lite

BATCH = 4
SEED = 5


def names(batch):
    """A collate function: the records' file names."""
    return [record["image/filename"].decode() for record in batch]


def main(kind, out, work, epochs, stop_after):
    src = tfrecorder_lite.data_source(out, "TRAIN")
    state_file = os.path.join(work, "state.json")
    saved = json.load(open(state_file)) if os.path.exists(state_file) else None
    position = saved["position"] if saved else 0  # torch: the records trained, all hosts
    first_epoch = saved["epoch"] if saved else 0
    if kind == "stateful":
        from torchdata.stateful_dataloader import StatefulDataLoader

        sampler = tfrecorder_lite.RecordSampler(src, seed=SEED)
        loader = StatefulDataLoader(src, batch_size=BATCH, sampler=sampler, num_workers=2,
                                    collate_fn=names)
        if saved:
            loader.load_state_dict(saved["loader"])
    else:
        from torch.utils.data import DataLoader

        sampler = tfrecorder_lite.RecordSampler(src, seed=SEED, start=position)
        loader = DataLoader(src, batch_size=BATCH, sampler=sampler, num_workers=2,
                            collate_fn=names)
    done = 0
    for epoch in range(first_epoch, epochs):
        sampler.set_epoch(epoch)
        trained = max(0, position - epoch * len(src))  # records of this epoch trained
        for batch in loader:
            print("BATCH", json.dumps(batch), flush=True)
            done += 1
            trained += len(batch)
            if done == stop_after:
                # torch's loader: its workers have read ahead, so count what was trained
                state = {"epoch": epoch, "position": epoch * len(src) + trained}
                if kind == "stateful":
                    state["loader"] = loader.state_dict()
                with open(state_file, "w") as f:
                    json.dump(state, f)
                return


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
