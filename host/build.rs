fn main() {
    xprof_static_unwind::link();
}
