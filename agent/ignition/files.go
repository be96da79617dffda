package ignition

// File returns the contents a storage.files entry for path gives, when
// they are known without the node (inline or already fetched and
// replacing the file); ok is false otherwise.
func (cfg *Config) File(path string) (data []byte, ok bool) {
	data, ok = cfg.knownFiles()[cleanPath(path)]
	return data, ok
}
