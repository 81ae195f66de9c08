"""Integer columns that hold a storm's figures in 8 bytes each (array 'q'), yet never refuse a value."""

from __future__ import annotations

from array import array

IntColumn = array | list


def int_column() -> IntColumn:
    return array("q")


def append_int(column: IntColumn, value: int) -> IntColumn:
    """Append ``value``; the column to keep: a list, with the same values, once one does not fit 64 bits (an
    absurd time or id from a damaged capture)."""
    try:
        column.append(value)
    except OverflowError:
        return [*column, value]
    return column
