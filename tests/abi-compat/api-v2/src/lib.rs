//! A deliberately incompatible variant of `xprof-plugin-api`: version 0.2.0 and `invoke` takes
//! an owned `RString`. The host must refuse a plugin built against it, with a one-line reason.

use abi_stable::{
    StableAbi, declare_root_module_statics,
    library::RootModule,
    package_version_strings,
    sabi_types::VersionStrings,
    std_types::{RResult, RStr, RString},
};

#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModRef)))]
#[sabi(missing_field(panic))]
pub struct PluginMod {
    pub abi_info: extern "C" fn() -> RString,
    pub descriptors: extern "C" fn() -> RString,
    #[sabi(last_prefix_field)]
    pub invoke: extern "C" fn(RString, RStr<'_>, RStr<'_>) -> RResult<RString, RString>,
}

impl RootModule for PluginModRef {
    declare_root_module_statics! {PluginModRef}
    const BASE_NAME: &'static str = "xprof_plugin";
    const NAME: &'static str = "xprof_plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}
