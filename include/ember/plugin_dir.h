// For programs linked with the static libember.a: records the installed plugin folder in the
// program, so its backend plugins are found without EMBER_PLUGIN_PATH. ember-static.pc adds
// `-DEMBER_STATIC_PLUGIN_DIR=<prefix>/lib/ember/plugins -include ember/plugin_dir.h` to the
// compile flags; the CMake package (Ember::ember_static) defines the same symbol in a generated
// source instead. Without EMBER_STATIC_PLUGIN_DIR this header defines nothing. (docs/install.md)
#pragma once

#ifdef EMBER_STATIC_PLUGIN_DIR
// The path arrives unquoted (pkg-config cannot pass a quoted string through a shell's $(...)) and
// is turned into a string here; GNU mode's predefined `linux` and `unix` would otherwise be
// expanded inside paths such as lib/x86_64-linux-gnu.
#pragma push_macro("linux")
#pragma push_macro("unix")
#undef linux
#undef unix
#define EMBER_DETAIL_PLUGIN_DIR_TEXT2(...) #__VA_ARGS__
#define EMBER_DETAIL_PLUGIN_DIR_TEXT(x) EMBER_DETAIL_PLUGIN_DIR_TEXT2(x)
// Weak: every translation unit may define it; the linker keeps one. The library reads it
// through a weak reference (src/runtime/registry.cpp), so programs without it link as well.
extern "C" {
__attribute__((weak)) const char* ember_static_plugin_dir = EMBER_DETAIL_PLUGIN_DIR_TEXT(EMBER_STATIC_PLUGIN_DIR);
}
#undef EMBER_DETAIL_PLUGIN_DIR_TEXT
#undef EMBER_DETAIL_PLUGIN_DIR_TEXT2
#pragma pop_macro("unix")
#pragma pop_macro("linux")
#endif
