/*
 * contrib/examples/demo.c - the quick start's demo, and the shortest complete
 * example of the embedding API: load a provider, open a sandbox, write a file
 * into it, run code that reads the file, print the result, clean up.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aksandbox/aksandbox.h>

static int fail(const char *what, aks_error *err)
{
	fprintf(stderr, "demo: %s: %s\n", what, aks_error_message(err));
	aks_error_free(err);
	return 1;
}

int main(int argc, char **argv)
{
	const char *type = argc > 1 ? argv[1] : "local_subprocess";
	const aks_plugin *plugin = NULL;
	aks_provider *prov = NULL;
	aks_sandbox *sb = NULL;
	aks_result *result = NULL;
	aks_error *err = NULL;
	aks_call call;

	if (aks_plugin_load(type, AKS_PLUGIN_PROVIDER, &plugin, &err) < 0)
		return fail("loading the provider", err);
	if (aks_provider_open(plugin, NULL, &prov, &err) < 0)
		return fail("opening the provider", err);
	printf("provider  %s %s (%s)\n", aks_plugin_get_descriptor(plugin)->name,
	       aks_plugin_get_descriptor(plugin)->version, aks_plugin_get_file(plugin));

	aks_call_init(&call, 30, NULL, NULL, NULL);
	if (aks_provider_create(prov, &call, &sb, &err) < 0)
		return fail("creating a sandbox", err);
	printf("sandbox   %s\n", aks_sandbox_get_id(sb));

	const char *note = "aksandbox says hello\n";
	if (aks_sandbox_upload_file(sb, "notes/hello.txt", note, strlen(note), &call, &err) < 0)
		return fail("writing notes/hello.txt", err);
	printf("wrote     notes/hello.txt\n");

	const char *code = "text = open('notes/hello.txt').read()\n"
	                   "print(text.strip().upper(), len(text), 'bytes')\n";
	if (aks_sandbox_execute_code(sb, code, "python", &call, &result, &err) < 0)
		return fail("running code", err);
	printf("ran       python reading the file\n");
	printf("stdout    %s", aks_result_get_stdout(result, NULL));
	printf("exit code %d\n", aks_result_get_exit_code(result));
	int status = aks_result_get_exit_code(result) == 0 ? 0 : 1;
	aks_result_free(result);

	char *id = strdup(aks_sandbox_get_id(sb));
	aks_sandbox_close(sb);
	if (aks_provider_destroy(prov, id, &call, &err) < 0)
		status = fail("destroying the sandbox", err);
	else
		printf("destroyed %s\n", id);
	free(id);
	aks_provider_close(prov);
	return status;
}
