# AKS_PLUGIN(NAME, DEPS-FOUND, DEPS-HINT, HELP)
# --------------------------------------------
# Declares --enable-plugin-NAME=auto|yes|no (default auto); any other value
# fails at once, before the compiler checks.
#   auto  builds the plugin when DEPS-FOUND is "yes";
#   yes   builds it, and configure fails (after the summary) when DEPS-FOUND is
#         not "yes", naming DEPS-HINT (the Debian packages to install);
#   no    never builds it.
# Defines the automake conditional BUILD_PLUGIN_<NAME> and records a line for
# the summary printed by AKS_PLUGIN_SUMMARY.
AC_DEFUN([AKS_PLUGIN], [
m4_pushdef([aks_upname], m4_translit([$1], [a-z-], [A-Z_]))
dnl A bad value fails before the compiler checks, not a minute later.
m4_divert_text([INIT_PREPARE],
  [AS_CASE([${enable_plugin_$1-auto}], [auto|yes|no], [],
    [AC_MSG_ERROR([--enable-plugin-$1 takes auto, yes or no, not '$enable_plugin_$1'])])])
AC_ARG_ENABLE([plugin-]m4_translit([$1], [_], [-]),
  [AS_HELP_STRING([--enable-plugin-]m4_translit([$1], [_], [-])[=auto|yes|no], [$4 (default: auto)])],
  [aks_want_$1=$enableval], [aks_want_$1=${aks_want_all_plugins:-auto}])
aks_build_$1=no
aks_why_$1=""
AS_CASE([$aks_want_$1],
  [no], [aks_why_$1="disabled"],
  [yes], [AS_IF([test "x$2" = xyes], [aks_build_$1=yes],
                [aks_why_$1="MISSING: install $3"
                 aks_failed_plugins="$aks_failed_plugins $1"])],
  [auto], [AS_IF([test "x$2" = xyes], [aks_build_$1=yes],
                 [aks_why_$1="dependencies not found ($3)"])],
  [AC_MSG_ERROR([--enable-plugin-$1 takes auto, yes or no, not '$aks_want_$1'])])
AM_CONDITIONAL([BUILD_PLUGIN_]aks_upname, [test "x$aks_build_$1" = xyes])
aks_plugin_summary="$aks_plugin_summary
    m4_format([%-20s], [$1]) $aks_build_$1 $aks_why_$1"
m4_popdef([aks_upname])
])

# AKS_PLUGIN_SUMMARY
# ------------------
# Prints the table of plugins and fails when an explicitly requested plugin
# cannot be built.
AC_DEFUN([AKS_PLUGIN_SUMMARY], [
AS_ECHO([""])
AS_ECHO(["aksandbox $PACKAGE_VERSION configuration"])
AS_ECHO(["    prefix               $prefix"])
AS_ECHO(["    plugin directory     $aks_plugindir_display"])
AS_ECHO(["    sanitizers           $enable_sanitizers"])
AS_ECHO(["    unit tests (cmocka)  $have_cmocka"])
AS_ECHO([""])
AS_ECHO(["  plugins              build"])
AS_ECHO(["$aks_plugin_summary"])
AS_ECHO([""])
AS_IF([test -n "$aks_failed_plugins"],
  [AC_MSG_ERROR([plugins requested with --enable-plugin-NAME=yes lack their dependencies:$aks_failed_plugins (see the table above)])])
])
