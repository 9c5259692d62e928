//! HLO: the text model and parser, graph algorithms (neighborhoods, paths), XLA dump-folder
//! discovery and stage diffs. Everything here works on files and text; the plugin maps
//! [`HloError`] to exit-code classes.

pub mod capture;
pub mod diff;
pub mod dot;
pub mod dump;
pub mod error;
pub mod graph;
pub mod print;
pub mod query;
pub mod text;

pub use error::HloError;
pub use graph::{Direction, Graph, Neighbor};
pub use text::{Computation, Instruction, Module, parse};
