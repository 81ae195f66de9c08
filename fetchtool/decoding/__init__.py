"""A decode run split across two processes (see forked.py): the items' plain-tuple form (items.py) and the
forked child that decodes a whole run while this process consumes its items."""
