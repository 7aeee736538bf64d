# The test command (README, .ci/run): vet, every test with the race
# detector, then each fuzz target for a few seconds.
#
# Fuzz budgets are counts of executions (-fuzztime Nx), each sized to about
# 5 s on the project's 2-core machine, not durations: with a duration, Go
# 1.26's fuzz coordinator can fail a target with a bare "context deadline
# exceeded" when the time runs out under load (golang/go#75804, fixed in
# Go 1.27). FUZZSCALE multiplies every budget: make fuzz FUZZSCALE=20.
FUZZSCALE ?= 1
fuzzn = $(shell expr $(1) \* $(FUZZSCALE))x

.PHONY: test vet fuzz build

test: vet
	go test -race -count=1 ./...
	$(MAKE) fuzz

vet:
	go vet ./...

# One line per target: go test -fuzz takes one target of one package at a time.
fuzz:
	go test -run '^$$' -fuzz '^FuzzDecodeTaskRecord$$' -fuzztime $(call fuzzn,40000) ./tasks/internal/record
	go test -run '^$$' -fuzz '^FuzzDecodeEvent$$' -fuzztime $(call fuzzn,40000) ./tasks
	go test -run '^$$' -fuzz '^FuzzApply$$' -fuzztime $(call fuzzn,40000) ./tasks
	go test -run '^$$' -fuzz '^FuzzAppendEvent$$' -fuzztime $(call fuzzn,8000) ./internal/a2ajson
	go test -run '^$$' -fuzz '^FuzzEncodeTaskRecord$$' -fuzztime $(call fuzzn,20000) ./tasks/boltstore
	go test -run '^$$' -fuzz '^FuzzAppendAny$$' -fuzztime $(call fuzzn,8000) ./internal/a2ajson
	go test -run '^$$' -fuzz '^FuzzDecodeEvents$$' -fuzztime $(call fuzzn,35000) ./tasks/boltstore
	go test -run '^$$' -fuzz '^FuzzDecodeRecord$$' -fuzztime $(call fuzzn,35000) ./tasks/internal/record
	go test -run '^$$' -fuzz '^FuzzStoreURL$$' -fuzztime $(call fuzzn,30000) ./tasks/redisstore
	go test -run '^$$' -fuzz '^FuzzSealed$$' -fuzztime $(call fuzzn,20000) ./tasks
	go test -run '^$$' -fuzz '^FuzzSealedURL$$' -fuzztime $(call fuzzn,20000) ./tasks
	go test -run '^$$' -fuzz '^FuzzDecodeEntries$$' -fuzztime $(call fuzzn,30000) ./tasks/redisstore
	go test -run '^$$' -fuzz '^FuzzDecodeWALRecord$$' -fuzztime $(call fuzzn,120000) ./tasks/boltstore
	go test -run '^$$' -fuzz '^FuzzScanWAL$$' -fuzztime $(call fuzzn,60000) ./tasks/boltstore
	go test -run '^$$' -fuzz '^FuzzJSONRPCRequest$$' -fuzztime $(call fuzzn,10000) .
	go test -run '^$$' -fuzz '^FuzzDecodeRPC$$' -fuzztime $(call fuzzn,20000) ./internal/a2ahttp
	go test -run '^$$' -fuzz '^FuzzParseConfig$$' -fuzztime $(call fuzzn,8000) .
	go test -run '^$$' -fuzz '^FuzzAuthenticate$$' -fuzztime $(call fuzzn,50000) ./internal/auth
	go test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(call fuzzn,5000) ./agentcard
	go test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(call fuzzn,20000) ./push/webhook
	go test -run '^$$' -fuzz '^FuzzEnvelope$$' -fuzztime $(call fuzzn,20000) ./delegation
	go test -run '^$$' -fuzz '^FuzzRecord$$' -fuzztime $(call fuzzn,25000) ./delegation
	go test -run '^$$' -fuzz '^FuzzParseContract$$' -fuzztime $(call fuzzn,12000) ./acceptance
	go test -run '^$$' -fuzz '^FuzzCondition$$' -fuzztime $(call fuzzn,12000) ./acceptance
	go test -run '^$$' -fuzz '^FuzzExplain$$' -fuzztime $(call fuzzn,3000) ./acceptance
	go test -run '^$$' -fuzz '^FuzzAssembler$$' -fuzztime $(call fuzzn,6000) ./artifacts
	go test -run '^$$' -fuzz '^FuzzCollector$$' -fuzztime $(call fuzzn,8000) ./artifacts
	go test -run '^$$' -fuzz '^FuzzDecodeAuditRecord$$' -fuzztime $(call fuzzn,20000) ./mcp
	go test -run '^$$' -fuzz '^FuzzObject$$' -fuzztime $(call fuzzn,10000) ./internal/jcs
	go test -run '^$$' -fuzz '^FuzzAppend$$' -fuzztime $(call fuzzn,15000) ./internal/jcs
	go test -run '^$$' -fuzz '^FuzzAppendPruned$$' -fuzztime $(call fuzzn,20000) ./internal/jcs
	go test -run '^$$' -fuzz '^FuzzRenameMessageParts$$' -fuzztime $(call fuzzn,30000) ./internal/rest03
	go test -run '^$$' -fuzz '^FuzzCoerce$$' -fuzztime $(call fuzzn,30000) ./internal/model
	go test -run '^$$' -fuzz '^FuzzParseResponse$$' -fuzztime $(call fuzzn,30000) ./internal/model
	go test -run '^$$' -fuzz '^FuzzCanonicalPath$$' -fuzztime $(call fuzzn,60000) ./mcp/policy
	go test -run '^$$' -fuzz '^FuzzCanonicalURL$$' -fuzztime $(call fuzzn,25000) ./mcp/policy
	go test -run '^$$' -fuzz '^FuzzNew$$' -fuzztime $(call fuzzn,25000) ./mcp/policy

build:
	go build -o bin/handoff ./cmd/handoff
