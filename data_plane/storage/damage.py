"""Damaged batches inside a segment: where they lie, where the intact log resumes, and the
file that remembers them across restarts.

A batch is *damaged* when its bytes no longer pass ``validate_batch`` (a flipped bit on disk)
while intact batches follow it. Its bytes stay where they are, so no later batch moves and
no offset is ever reused; the range ``[first_offset, next_offset)`` is taken out of service
until a replica's copy is written back over it (same base offset, same length: replicas of
one leader epoch hold byte-identical batches), or for good (``lost``) when no replica can
give it back. Every scan of a segment jumps over a damaged range instead of parsing it.

``find_resync`` says where the intact log resumes after a damaged batch. A damaged batch
with nothing intact after it in the file is a torn tail, which recovery cuts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from data_plane.record_batch import HEADER_SIZE, MAGIC, BatchHeader, CorruptBatchError, read_header, validate_batch
from data_plane.storage.checkpoint_file import read_lines, write_lines

# (length, position) -> the bytes there: a segment's ``pread`` (which reopens a file the
# handle cache closed) or ``functools.partial(os.pread, fd)`` over a descriptor of one's own.
# Scans take this rather than a descriptor, which another segment's open could close meanwhile.
ReadAt = Callable[[int, int], bytes]

DAMAGE_FILE = "damaged-ranges"
RESYNC_CHUNK_BYTES = 1 << 20
_MAGIC_AT = 16  # offset of the magic byte inside a batch header
_MAGIC_BYTE = bytes([MAGIC])


@dataclass(frozen=True)
class DamagedRange:
    """Bytes ``[position, end_position)`` of segment ``segment_base`` hold offsets
    ``[first_offset, next_offset)``, unreadable here; ``lost``: no replica can repair them."""

    segment_base: int
    position: int
    end_position: int
    first_offset: int
    next_offset: int
    lost: bool = False

    def as_header(self) -> BatchHeader:
        """A stand-in header for scans: the range's offsets and size, no producer, no epoch, no timestamp."""
        count = self.next_offset - self.first_offset
        return BatchHeader(self.first_offset, self.end_position - self.position, -1, MAGIC, 0, 0, count - 1, -1, -1, -1, -1, -1, count)

    def marked_lost(self) -> "DamagedRange":
        return replace(self, lost=True)

    def describe(self) -> str:
        """``corrupt 500-549`` (lost) or ``repairing 500-549``: the note ``topics describe`` shows."""
        return f"{'corrupt' if self.lost else 'repairing'} {self.first_offset}-{self.next_offset - 1}"


def _plausible(header: BatchHeader, after_offset: int, room: int) -> bool:
    """Header fields an intact batch starting the rest of the log must have (checked before its CRC)."""
    return (
        header.magic == MAGIC
        and header.base_offset > after_offset
        and HEADER_SIZE <= header.batch_length <= room
        and header.record_count >= 1
        and header.last_offset_delta == header.record_count - 1
    )


def find_resync(read: ReadAt, position: int, file_size: int, expected_offset: int) -> tuple[int, BatchHeader] | None:
    """(position, header) of the first intact batch after the damaged batch at ``position``
    (which should have held ``expected_offset``), or None when nothing intact follows (a torn tail).

    First tries where the damaged batch's own length points (a flipped bit in a body leaves
    the header whole); otherwise searches forward for a position that holds a batch with a
    plausible header, offsets above ``expected_offset`` and a matching CRC.
    """
    head = read(HEADER_SIZE, position)
    if len(head) == HEADER_SIZE:
        header = read_header(head)
        end = position + header.batch_length
        if header.magic == MAGIC and position + HEADER_SIZE <= end < file_size:
            found = _intact_at(read, end, file_size, expected_offset)
            if found is not None:
                return end, found
    return _search(read, position + 1, file_size, expected_offset)


def _intact_at(read: ReadAt, position: int, file_size: int, after_offset: int) -> BatchHeader | None:
    head = read(HEADER_SIZE, position)
    if len(head) < HEADER_SIZE or not _plausible(read_header(head), after_offset, file_size - position):
        return None
    header = read_header(head)
    try:
        return validate_batch(read(header.batch_length, position))
    except CorruptBatchError:
        return None


def _search(read: ReadAt, start: int, file_size: int, after_offset: int) -> tuple[int, BatchHeader] | None:
    """Candidates are the positions whose magic byte is right (``bytes.find``, C-level); the
    rest of the header and then the CRC must match too."""
    pos = start
    while pos + HEADER_SIZE <= file_size:
        chunk = read(min(RESYNC_CHUNK_BYTES + HEADER_SIZE, file_size - pos), pos)
        at = chunk.find(_MAGIC_BYTE, _MAGIC_AT)
        while at != -1 and at - _MAGIC_AT + HEADER_SIZE <= len(chunk):
            candidate = pos + at - _MAGIC_AT
            if _plausible(read_header(chunk, at - _MAGIC_AT), after_offset, file_size - candidate):
                found = _intact_at(read, candidate, file_size, after_offset)
                if found is not None:
                    return candidate, found
            at = chunk.find(_MAGIC_BYTE, at + 1)
        pos += max(len(chunk) - HEADER_SIZE, 1)
    return None


def read_damage_file(directory: Path) -> list[DamagedRange]:
    """The ranges a previous run recorded (none when the file is missing)."""
    out = []
    for line in read_lines(directory / DAMAGE_FILE, version=0):
        base, position, end, first, nxt, lost = line.split()
        out.append(DamagedRange(int(base), int(position), int(end), int(first), int(nxt), lost == "lost"))
    return out


def write_damage_file(directory: Path, ranges: list[DamagedRange]) -> None:
    """Replace the file atomically (removed when nothing is damaged)."""
    path = directory / DAMAGE_FILE
    if not ranges:
        path.unlink(missing_ok=True)
        return
    lines = [
        f"{r.segment_base} {r.position} {r.end_position} {r.first_offset} {r.next_offset} {'lost' if r.lost else 'repairing'}"
        for r in sorted(ranges, key=lambda r: r.first_offset)
    ]
    write_lines(path, version=0, lines=lines)
