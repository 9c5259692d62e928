fn main() {
    xprof_link::for_cold_start();
}
