// One tool per file.
mod diff_hlo_stages;
mod get_hlo_dump;
mod get_hlo_dump_neighborhood;
mod list_hlo_dump_modules;
