package checker

// lastKey remembers the state of the key looked up last: a run has a handful of keys and most
// consecutive events name the same one, found with a string comparison (the decoder shares one
// copy of each key, so mostly a pointer comparison) instead of a map's hash and probe.
type lastKey[V any] struct {
	key string
	v   *V
}

// find is the remembered state if key is the one remembered, nil otherwise.
func (l *lastKey[V]) find(key string) *V {
	if l.v != nil && l.key == key {
		return l.v
	}
	return nil
}

func (l *lastKey[V]) keep(key string, v *V) { l.key, l.v = key, v }
