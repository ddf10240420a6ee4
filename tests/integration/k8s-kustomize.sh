# k8s-kustomize.sh - sourced by the tests that apply contrib/kubernetes/ to the test cluster
# (k8s-manifests.test, k8s-in-cluster.test), after they define k() (kubectl with the
# cluster's kubeconfig): render OVERLAY_DIR OUT renders an overlay with kubectl's kustomize
# into OUT (its errors in OUT.err), the PodDisruptionBudget sent as the server serves it. The
# manifests use policy/v1 (1.21 and later, the only one from 1.25); the test cluster is 1.20,
# which has policy/v1beta1 only, and the rest is unchanged.
pdb_version=policy/v1
k api-versions 2>/dev/null | grep -qx policy/v1 || pdb_version=policy/v1beta1
render() { # OVERLAY_DIR OUT
	k kustomize "$1" >"$2.raw" 2>"$2.err" || return 1
	sed "s#^apiVersion: policy/v1\$#apiVersion: $pdb_version#" "$2.raw" >"$2"
}
