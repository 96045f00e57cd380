"""The read layer: typed, read-only functions over the SQL views of the read model (conventions
in `queries`), and the meaning of every field they return (`fields`)."""
