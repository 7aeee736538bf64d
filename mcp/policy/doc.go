// Package policy decides whether a proposed tool call may run, from rules in fixed layers,
// and says which rule decided and why.
//
// A [Policy] ([New]) holds configured [Rule]s, each in one [Layer]. [Policy.Decide] takes a
// [Call] (who asks, for which skill, the tool and its contract's classification, the
// canonical arguments and resources) and tries the layers highest first:
//
//	immutable deny > tenant deny > resource deny > mandatory ask > grant > allow > default
//
// The first layer with a matching rule decides, so nothing below a deny overrides it and no
// grant answers a mandatory ask. Within the allow layer an ask beats an allow. The
// [Decision] names the deciding rule, its layer, the policy's Version (a hash of the rules)
// and every rule that matched.
//
// Rules never see raw argument text where a contract names a resource: [Extract] takes the
// resources a tool's [ResourceSpec]s point at and makes them canonical ([CanonicalPath],
// [CanonicalURL]; ids are exact), so "./exports/../payments/x" is "payments/x" to every rule.
// A rule's optional When is a CEL condition over the canonical arguments.
//
// [Check] reports what a rule set gets wrong without being invalid: rules of one layer that
// overlap with different verdicts, and rules that can never match.
//
// The package holds no state and does no I/O: grants are given to each Call by the caller,
// which stores them.
package policy
