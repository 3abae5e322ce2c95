# staticcheck, pinned, included from the Makefile. The binary is installed
# once into a cache directory outside the tree (not into go.mod), so CI can
# run it on a clean clone.
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK_DIR     ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/snowchaos/staticcheck-$(STATICCHECK_VERSION)
STATICCHECK         := $(STATICCHECK_DIR)/staticcheck

.PHONY: staticcheck

## staticcheck: honnef.co/go/tools staticcheck (pinned by STATICCHECK_VERSION) over the root module and the bench module
staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...
	cd bench && $(STATICCHECK) ./...

$(STATICCHECK):
	GOBIN=$(STATICCHECK_DIR) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
