"""A file being written, which appears under its final name only when it is committed whole.

:class:`PendingFile` is the contract; the local disk (``local.LocalPendingFile``: a temporary
name beside the final one, fsync and rename) and object stores (``remote.RemotePendingFile``: a
local spool, one upload, its size checked) keep it each in their own way.
"""

import os

TEMP_SUFFIX = ".tmp"  # ends the name of every file being written


class PendingFile:
    """A file being written: write to it, then :meth:`commit` or :meth:`discard`.

    Attributes:
        name: the file's name in its folder.
        bytes_written: bytes written so far.
    """

    def __init__(self, name, file, temp_path):
        self.name = name
        self.bytes_written = 0
        self._file = file
        self._temp_path = temp_path

    def write(self, data):
        """Append ``data``: bytes, or a list of byte strings written one after the other.

        A list is handed to the OS as it is (one gathered write on the local disk), never
        joined into one more copy.
        """
        if isinstance(data, (bytes, bytearray, memoryview)):
            self._file.write(data)
            self.bytes_written += len(data)
        else:
            self.bytes_written += self._write_pieces(data)
        self._wrote()

    def writelines(self, pieces):
        """Append byte strings one after the other, without joining them (see :meth:`write`)."""
        self.write(list(pieces))

    def _write_pieces(self, pieces):
        """Write byte strings in order; returns how many bytes."""
        total = 0
        for piece in pieces:
            self._file.write(piece)
            total += len(piece)
        return total

    def _wrote(self):
        """Called after every write."""

    def commit(self):
        """Close the file and make it appear under its final name, whole."""
        raise NotImplementedError

    def discard(self):
        """Close the file and forget it: nothing appears under the final name."""
        self._file.close()
        try:
            os.remove(self._temp_path)
        except FileNotFoundError:
            pass
