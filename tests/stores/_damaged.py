"""SQLite files damaged as a disk or a stray write would, and the error each store gives."""

from __future__ import annotations

from pathlib import Path

from hookloop import CorruptStoreError, RunError

DAMAGES = ["truncated", "header overwritten", "page overwritten"]


def damage_file(path: Path, how: str) -> None:
    """Damage a SQLite file (``how`` is one of :data:`DAMAGES`)."""
    size = path.stat().st_size
    with path.open("r+b") as f:
        if how == "truncated":
            f.truncate(size // 2)
        elif how == "header overwritten":
            f.write(b"not a database " * 8)
        else:  # the rest of the first page: the tables' schema
            f.seek(100)
            f.write(b"\xa5" * (4096 - 100))


def check_damaged_file_error(error: CorruptStoreError, path: Path) -> None:
    """The error names the file, says what SQLite found, and what to do."""
    assert isinstance(error, RunError)
    assert error.store == str(path)
    assert error.reason in ("database disk image is malformed", "file is not a database")
    assert str(error) == (
        f"the store's database file {path} is damaged ({error.reason}): restore it "
        "from a backup or start a new file"
    )
