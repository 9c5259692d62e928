//! smart suggestions.
