use abi_stable::export_root_module;
use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::{RResult, RStr, RString};
use api::{PluginMod, PluginModRef};

extern "C" fn abi_info() -> RString {
    r#"{"name":"incompatible","version":"0.1.0","protocol":1,"capabilities":[]}"#.into()
}
extern "C" fn descriptors() -> RString {
    "[]".into()
}
extern "C" fn invoke(_: RString, _: RStr<'_>, _: RStr<'_>) -> RResult<RString, RString> {
    RResult::RErr("unreachable".into())
}

#[export_root_module]
pub fn root() -> PluginModRef {
    PluginMod {
        abi_info,
        descriptors,
        invoke,
    }
    .leak_into_prefix()
}
