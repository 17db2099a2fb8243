import { render } from 'preact';
import { MapPage } from './map-page.tsx';
import './styles.css';

render(<MapPage />, document.getElementById('root')!);
