//! The benchmark suite (whole processes and in-process).
pub fn run(_args: &[String]) -> crate::Result {
    Err("bench: not written yet".into())
}
