# The Kubernetes side, included from the Makefile. The fleet
# manifests and the Chaos Mesh export live in their own module under
# deploy/kube, so the main module never depends on the Kubernetes or Chaos
# Mesh API modules.
#
#   make kube-build                         build bin/snowchaos-kube (snowchaos export chaos-mesh runs it)
#   make export-chaos-mesh SCENARIO=storm   print a scenario's Chaos Mesh Workflow (a file or a built-in name; builds bin/snowchaos-kube)
#   make kube-manifests                     regenerate deploy/kube/manifests and the golden exports
#   make kube-test                          vet and test the module (race detector on)
#   make kube-crds                          regenerate deploy/kube/crd (the CRD schemas the tests validate against)
KUBE_GO  ?= $(GO)
KUBE_BIN := bin/snowchaos-kube

.PHONY: kube-build kube-test kube-manifests kube-crds export-chaos-mesh

## kube-build: build bin/snowchaos-kube, which `snowchaos export chaos-mesh` runs (put bin/ on PATH)
kube-build:
	cd deploy/kube && CGO_ENABLED=0 $(KUBE_GO) build -trimpath -o ../../$(KUBE_BIN) ./cmd/snowchaos-kube

## kube-test: vet and test the deploy/kube module (fleet manifests, Chaos Mesh export; race detector on)
kube-test:
	cd deploy/kube && $(KUBE_GO) vet ./... && $(KUBE_GO) test -race -count=1 ./...

## kube-manifests: regenerate deploy/kube/manifests and deploy/kube/chaosmesh/testdata (review the diff)
kube-manifests:
	cd deploy/kube && $(KUBE_GO) test -count=1 ./fleet ./chaosmesh -update

## export-chaos-mesh: print the Chaos Mesh Workflow of SCENARIO (a file, or a built-in name such as storm)
export-chaos-mesh: kube-build
	@case '$(origin SCENARIO)' in "command line"|environment*) ;; \
	  *) echo "usage: make export-chaos-mesh SCENARIO=storm (a built-in name, or a path to a scenario file)"; exit 2;; esac
	@$(KUBE_BIN) export chaos-mesh '$(SCENARIO)'

# The CRDs the tests validate exported objects against, generated (without
# descriptions) by controller-gen from the same pinned API modules the
# objects are built with, as Chaos Mesh and the Prometheus Operator do.
KUBE_CRD_TMP := deploy/kube/crd.tmp

## kube-crds: regenerate deploy/kube/crd from the pinned Chaos Mesh and Prometheus Operator API modules (controller-gen)
kube-crds:
	rm -rf $(KUBE_CRD_TMP)
	cd deploy/kube && $(KUBE_GO) tool controller-gen crd:ignoreUnexportedFields=true,crdVersions=v1,maxDescLen=0 \
		paths=github.com/chaos-mesh/chaos-mesh/api/v1alpha1 output:crd:dir=crd.tmp/chaos-mesh
	cd deploy/kube && $(KUBE_GO) tool controller-gen crd:crdVersions=v1,maxDescLen=0 \
		paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 output:crd:dir=crd.tmp/monitoring
	mkdir -p deploy/kube/crd
	cp $(KUBE_CRD_TMP)/chaos-mesh/chaos-mesh.org_workflows.yaml $(KUBE_CRD_TMP)/monitoring/monitoring.coreos.com_podmonitors.yaml deploy/kube/crd/
	rm -rf $(KUBE_CRD_TMP)
