/*
 * extra_export.so - a working provider (the fake, under another name) that
 * exports more than aks_plugin_entry: it is compiled without
 * -fvisibility=hidden and linked without the export regex, as a careless third
 * party might build theirs. The loader accepts it; aksandbox-plugin-check must
 * fail it and name the leaked symbols (extra_export_leaked_helper and
 * extra_export_leaked_table).
 */
#define FAKE_PLUGIN_NAME "extra_export"
#include "../fake/fake.c"

int extra_export_leaked_helper(void);
extern const int extra_export_leaked_table[];

const int extra_export_leaked_table[] = {1, 2, 3};

int extra_export_leaked_helper(void)
{
	return extra_export_leaked_table[0];
}
