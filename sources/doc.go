// Package sources picks the termsig sources that apply on the current host
// ([Detect]) and provides a fake source for unit tests ([Fake]).
package sources
