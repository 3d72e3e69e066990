// Package words holds the small helpers that make ralph's messages read as
// English: "1 story", "2 stories", never "1 stories". It imports nothing of
// ralph's, so every package that prints can use it.
package words

import "strconv"

// Plural returns one when n is 1 and many otherwise. Irregular plurals
// ("criterion", "criteria") are why both forms are given.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Count returns n followed by the right form of the noun: "1 problem",
// "0 problems", "3 criteria".
func Count(n int, one, many string) string {
	return strconv.Itoa(n) + " " + Plural(n, one, many)
}
