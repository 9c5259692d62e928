//! `install` and `test`.
pub fn run(_args: &[String]) -> crate::Result {
    Err("install: not written yet".into())
}
pub fn test(_args: &[String]) -> crate::Result {
    Err("test: not written yet".into())
}
