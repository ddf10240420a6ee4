/*
 * plugins/common/kill_script.c - the shell script that kills, inside the
 * sandbox, every process of one run; see aks_killscript.h.
 *
 * $1 is the marker's value. $(cat ...) drops the NULs between variables, so
 * the pattern is a substring match on 32 random hex digits: unambiguous. A
 * zombie's environ reads empty, so the loop ends once all are dead.
 */
#include "aks_killscript.h"

const char aks_ctr_kill_script[] = "m=\"" AKS_CTR_MARKER_VAR "=$1\"; n=0\n"
                                   "while [ $n -lt 200 ]; do\n"
                                   "  found=0\n"
                                   "  for d in /proc/[0-9]*; do\n"
                                   "    p=${d#/proc/}\n"
                                   "    [ \"$p\" = \"$$\" ] && continue\n"
                                   "    case \"$(cat \"$d/environ\" 2>/dev/null)\" in\n"
                                   "    *\"$m\"*) kill -9 \"$p\" 2>/dev/null; found=1 ;;\n"
                                   "    esac\n"
                                   "  done\n"
                                   "  [ $found = 0 ] && exit 0\n"
                                   "  n=$((n + 1))\n"
                                   "done\n"
                                   "exit 1\n";
