//! Owned by the proto/reader work: regenerate `proto/src/gen/*.rs` from `proto/*.proto`.
pub fn run(_args: &[String]) -> crate::Result {
    Err("codegen: not written yet".into())
}
