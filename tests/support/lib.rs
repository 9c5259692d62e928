//! test support (being written)
