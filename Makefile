# The test command (README, .ci/run): vet, every test with the race
# detector, then each fuzz target for a few seconds.
FUZZTIME ?= 5s

.PHONY: test vet fuzz build

test: vet
	go test -race -count=1 ./...
	$(MAKE) fuzz

vet:
	go vet ./...

# One line per target: go test -fuzz takes one target of one package at a time.
fuzz:
	go test -run '^$$' -fuzz '^FuzzDecodeTaskRecord$$' -fuzztime $(FUZZTIME) ./tasks
	go test -run '^$$' -fuzz '^FuzzDecodeEvent$$' -fuzztime $(FUZZTIME) ./tasks
	go test -run '^$$' -fuzz '^FuzzApply$$' -fuzztime $(FUZZTIME) ./tasks
	go test -run '^$$' -fuzz '^FuzzAppendEvent$$' -fuzztime $(FUZZTIME) ./tasks
	go test -run '^$$' -fuzz '^FuzzEncodeTaskRecord$$' -fuzztime $(FUZZTIME) ./tasks
	go test -run '^$$' -fuzz '^FuzzAppendAny$$' -fuzztime $(FUZZTIME) ./tasks
	go test -run '^$$' -fuzz '^FuzzDecodeEvents$$' -fuzztime $(FUZZTIME) ./tasks
	go test -run '^$$' -fuzz '^FuzzDecodeRecord$$' -fuzztime $(FUZZTIME) ./tasks
	go test -run '^$$' -fuzz '^FuzzStoreURL$$' -fuzztime $(FUZZTIME) ./tasks
	go test -run '^$$' -fuzz '^FuzzSealed$$' -fuzztime $(FUZZTIME) ./tasks
	go test -run '^$$' -fuzz '^FuzzDecodeEntries$$' -fuzztime $(FUZZTIME) ./tasks
	go test -run '^$$' -fuzz '^FuzzJSONRPCRequest$$' -fuzztime $(FUZZTIME) .
	go test -run '^$$' -fuzz '^FuzzParseConfig$$' -fuzztime $(FUZZTIME) .
	go test -run '^$$' -fuzz '^FuzzAuthenticate$$' -fuzztime $(FUZZTIME) ./internal/auth
	go test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME) ./agentcard
	go test -run '^$$' -fuzz '^FuzzCanonical$$' -fuzztime $(FUZZTIME) ./agentcard
	go test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME) ./push
	go test -run '^$$' -fuzz '^FuzzEnvelope$$' -fuzztime $(FUZZTIME) ./delegation
	go test -run '^$$' -fuzz '^FuzzRecord$$' -fuzztime $(FUZZTIME) ./delegation
	go test -run '^$$' -fuzz '^FuzzParseContract$$' -fuzztime $(FUZZTIME) ./acceptance
	go test -run '^$$' -fuzz '^FuzzCondition$$' -fuzztime $(FUZZTIME) ./acceptance
	go test -run '^$$' -fuzz '^FuzzAssembler$$' -fuzztime $(FUZZTIME) ./artifacts
	go test -run '^$$' -fuzz '^FuzzCollector$$' -fuzztime $(FUZZTIME) ./artifacts
	go test -run '^$$' -fuzz '^FuzzCanonical$$' -fuzztime $(FUZZTIME) ./mcp
	go test -run '^$$' -fuzz '^FuzzDecodeAuditRecord$$' -fuzztime $(FUZZTIME) ./mcp
	go test -run '^$$' -fuzz '^FuzzObject$$' -fuzztime $(FUZZTIME) ./internal/jcs

build:
	go build -o bin/handoff ./cmd/handoff
